// The MPI implementations of each collective, run on the communicator's worker thread.
// Two families (docs/comm.md has the measurements that chose between them):
//   native: one MPI call (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, ...), using the
//           bf16/fp16 types and ops of MpiRuntime for 16-bit payloads;
//   ring:   our ring over MPI_Sendrecv of raw bytes with the reduction done by comm/kernels.h into
//           scratch memory the communicator keeps. Open MPI's reducing collectives allocate (and,
//           from 32 MiB, page-fault in) a full-size temporary buffer on every call, which made
//           them 10-40x slower than the ring for 64 MiB buffers on the machine measured. The ring also makes every
//           rank's all_reduce result bitwise identical: chunk c is summed in the fixed order
//           x[c+1] + x[c+2] + ... + x[c] (rank indices mod N) and then copied to all ranks.
// When the worker waits by sleeping (every rank on its own host, comm/mpi_wait.h), large all_gathers
// take the ring too, and large reduces a chain root+1 -> root+2 -> ... -> root: MPI's collectives
// cannot be waited for without spinning.
// Internal to src/comm.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "comm/communicator.h"
#include "comm/mpi_runtime.h"
#include "comm/mpi_wait.h"

namespace ds::comm {

enum class MpiAlgorithm : uint8_t { Auto, Native, Ring };

// Grow-only scratch memory (64-byte aligned), reused across collectives so its pages are touched
// once, not on every call.
class Scratch {
 public:
  void* get(std::size_t slot, std::size_t bytes);  // slot 0 or 1
 private:
  struct AlignedDelete {
    void operator()(char* p) const noexcept { ::operator delete[](p, std::align_val_t(64)); }
  };
  struct Block {
    std::unique_ptr<char[], AlignedDelete> data;
    std::size_t bytes = 0;
  };
  Block blocks_[2];
};

struct MpiRunContext {
  MPI_Comm comm;
  int rank;
  int size;
  MpiRuntime& runtime;
  Scratch& scratch;
  MpiAlgorithm algorithm;        // Auto: ring for reductions of >= ring_threshold_bytes * (size - 1)
  int64_t ring_threshold_bytes;
  int64_t ring_slice_bytes;      // elements per ring step are capped at this many bytes
  MpiWait wait = MpiWait::Spin;  // how point-to-point transfers are waited for
};

// Runs `c` (validated by Communicator) to completion; throws ds::CommError on an MPI error.
void run_mpi_collective(const MpiRunContext& ctx, const Collective& c);

// Whether Auto picks the ring for this collective (exposed for tests and the benchmark).
bool use_ring(const MpiRunContext& ctx, const Collective& c);
// Whether a reduce runs as the chain of point-to-point transfers (sleeping waits, large buffers).
bool use_chain_reduce(const MpiRunContext& ctx, const Collective& c);

}  // namespace ds::comm
