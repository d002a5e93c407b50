// How the communicator's worker waits for its MPI transfers. Open MPI progresses a transfer only
// inside MPI calls, so a blocking call spins a core until the bytes have moved. Between hosts over
// TCP the kernel moves the bytes from socket buffers on its own, and a worker that polls the
// transfer with sleeps in between leaves the core to the computation it is meant to overlap
// (measured in docs/comm.md, "Waiting between hosts"). On one host (shared memory) the copies happen
// inside MPI calls, so there the worker keeps spinning. Internal to src/comm.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string_view>

namespace ds::comm {

enum class MpiWait : uint8_t {
  Spin,   // MPI's blocking calls: lowest latency; a core busy until the transfer ends
  Sleep,  // nonblocking point-to-point transfers, tested every kSleepPollMicros, asleep between
};

inline constexpr int kSpinFirstMicros = 50;   // test without sleeping this long first (small messages)
inline constexpr int kSleepPollMicros = 100;  // then sleep this long between tests

// Completes every request; throws ds::CommError naming `what` on an MPI error.
void wait_all(std::span<MPI_Request> requests, MpiWait how, std::string_view what);

}  // namespace ds::comm
