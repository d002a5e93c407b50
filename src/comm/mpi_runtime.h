// MpiRuntime: the process's MPI library, shared by every MpiCommunicator in the process (MPI itself
// is process-global: it can be initialized once and finalized once). acquire() initializes MPI if
// nobody has (MPI_Init_thread asking for MPI_THREAD_MULTIPLE); the runtime then lives until the
// process exits, when it finalizes MPI if it was the one that initialized it (so a second engine
// after the first one was destroyed finds MPI still running). It also owns the MPI
// types and ops MPI lacks: 2-byte datatypes for bf16 and fp16 and sum/max/min over them.
// Internal to src/comm (includes <mpi.h>).
#pragma once

#include <mpi.h>

#include <memory>
#include <mutex>
#include <string_view>

#include "comm/types.h"

namespace ds::comm {

struct MpiInitOptions {
  // Before initializing MPI, export Open MPI defaults chosen by benchmarks/comm_bandwidth.cpp
  // (see docs/comm.md), each only if the environment does not set it already.
  bool tune_transport = true;
};

class MpiRuntime {
 public:
  // Throws ds::CommError if MPI was finalized by someone else or gives less than MPI_THREAD_SERIALIZED.
  static std::shared_ptr<MpiRuntime> acquire(const MpiInitOptions& options);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int thread_level() const noexcept { return thread_level_; }
  bool initialized_here() const noexcept { return initialized_here_; }

  MPI_Datatype datatype(ElemType t) const noexcept;
  MPI_Op op(ElemType t, ReduceOp op) const noexcept;

  // Held around every MPI call sequence. A no-op lock under MPI_THREAD_MULTIPLE; under
  // MPI_THREAD_SERIALIZED it keeps two communicators' threads out of MPI at the same time.
  std::unique_lock<std::mutex> serialize();

 private:
  MpiRuntime() = default;
  void create_types_and_ops();

  int thread_level_ = MPI_THREAD_SINGLE;
  bool initialized_here_ = false;
  std::mutex mu_;
  MPI_Datatype bf16_ = MPI_DATATYPE_NULL;
  MPI_Datatype fp16_ = MPI_DATATYPE_NULL;
  MPI_Op ops_[2][3] = {};  // [bf16, fp16][sum, max, min]
};

// Throws ds::CommError "<what>: <MPI error string> (MPI error class N)" unless rc is MPI_SUCCESS.
void check_mpi(int rc, std::string_view what);

// "MPI_THREAD_MULTIPLE" etc.
std::string_view thread_level_name(int level) noexcept;

}  // namespace ds::comm
