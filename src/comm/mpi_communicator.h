// MpiCommunicator: collectives over Open MPI between the ranks mpirun started. It owns an
// MPI_Comm_dup of MPI_COMM_WORLD (with MPI_ERRORS_RETURN, so MPI errors become ds::CommError
// naming the MPI error and the collective), a worker thread that runs this communicator's MPI calls
// in issue order (async collectives overlap the caller's work), scratch memory for the ring
// algorithms, and, unless DS_COMM_TIMEOUT_S=0, a watchdog that aborts the job with a diagnostic when
// a collective hangs. MPI is initialized by the first communicator if needed and finalized with the
// last one only if that runtime initialized it (comm/mpi_runtime.h). split() makes sub-communicators
// with MPI_Comm_split: each gets its own MPI_Comm, worker thread and watchdog, and shares the
// process's MpiRuntime. This header does not include <mpi.h>.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"

namespace ds::comm {

// Which implementation runs all_reduce / reduce_scatter / all_gather (docs/comm.md).
enum class MpiAlgorithmChoice : uint8_t {
  Auto,    // the measured fastest: ring for reductions of >= ring_threshold_bytes x (world size - 1)
           // bytes, MPI's own call below that and for all_gather
  Native,  // always the MPI call (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather)
  Ring,    // always our ring over MPI_Sendrecv
};

// How the worker waits for its transfers (comm/mpi_wait.h, docs/comm.md "Waiting between hosts").
enum class MpiWaitChoice : uint8_t {
  Auto,   // DS_COMM_WAIT (spin, sleep or auto) when set; else sleep when every rank of the
          // communicator is on a host of its own (its transfers cross the network), spin otherwise
  Spin,   // MPI's blocking calls
  Sleep,  // nonblocking transfers polled with sleeps between: the core stays with computation
};

struct MpiOptions {
  MpiAlgorithmChoice algorithm = MpiAlgorithmChoice::Auto;
  int64_t ring_threshold_bytes = int64_t(1) << 20;    // Auto: per (world size - 1), see above
  int64_t ring_slice_bytes = int64_t(4) << 20;        // ring step size; bounds scratch to 2 slices
  // Seconds a collective may run before the watchdog aborts the job; < 0: DS_COMM_TIMEOUT_S, else
  // 1800. 0 disables the watchdog.
  double timeout_s = -1;
  // Export the Open MPI transport defaults of docs/comm.md before MPI_Init (only when this
  // communicator initializes MPI, and never over a value already in the environment).
  bool tune_transport = true;
  MpiWaitChoice wait = MpiWaitChoice::Auto;
};

class MpiCommunicator final : public Communicator {
 public:
  // Collective over all ranks (MPI_Comm_dup): every rank must construct it at the same point.
  explicit MpiCommunicator(const MpiOptions& options = {});
  ~MpiCommunicator() override;  // finishes queued collectives first

  int rank() const noexcept override;
  int size() const noexcept override;
  Backend backend() const noexcept override { return Backend::Mpi; }

  const MpiOptions& options() const noexcept;
  int mpi_thread_level() const noexcept;   // MPI_THREAD_* the library gave
  double watchdog_timeout_s() const noexcept;  // 0 when disabled
  bool sleeps_while_waiting() const noexcept;  // the wait the options chose (MpiWaitChoice)

 protected:
  Work launch(const Collective& c) override;
  // MPI_Comm_split on this communicator's worker (in order with its collectives, watched by its
  // watchdog); the result is a new MpiCommunicator over the new MPI_Comm, with these options.
  std::unique_ptr<Communicator> split_logged(const Collective& c, int color, int key) override;

 private:
  struct Impl;
  explicit MpiCommunicator(std::unique_ptr<Impl> impl);  // adopts impl->comm (split)
  void start();  // error handler, rank and size, watchdog, worker: shared by both constructors
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::comm
