// Waiting for MPI requests by spinning or by polling with sleeps (see mpi_wait.h).
#include "comm/mpi_wait.h"

#include <chrono>
#include <thread>

#include "comm/mpi_runtime.h"

namespace ds::comm {

void wait_all(std::span<MPI_Request> requests, MpiWait how, std::string_view what) {
  const int n = int(requests.size());
  if (how == MpiWait::Spin) {
    check_mpi(MPI_Waitall(n, requests.data(), MPI_STATUSES_IGNORE), what);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto spin_until = Clock::now() + std::chrono::microseconds(kSpinFirstMicros);
  for (;;) {
    int done = 0;
    check_mpi(MPI_Testall(n, requests.data(), &done, MPI_STATUSES_IGNORE), what);
    if (done) return;
    if (Clock::now() >= spin_until) std::this_thread::sleep_for(std::chrono::microseconds(kSleepPollMicros));
  }
}

}  // namespace ds::comm
