// The io_uring backend (DeepSpeed's op uses libaio; io_uring is its successor and needs no
// per-request syscalls in the steady state). Mapping of DeepSpeed's "aio" keys:
//   intra_op_parallelism T: T workers, each a thread with its own ring; every request's blocks
//                           are cut into T contiguous runs, one per worker (DeepSpeed gives worker
//                           t the byte range [t·B/T, (t+1)·B/T) the same way).
//   queue_depth Q:          each ring has Q entries and keeps at most Q blocks in flight.
//   block_size:             the size of one kernel request (one SQE).
//   overlap_events:         true: refill the ring as soon as any block completes; false: submit
//                           a batch of up to Q, wait for all of it, repeat (DeepSpeed's sequential
//                           mode).
//   single_submit:          true: one io_uring_submit per SQE; false: one per batch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "aio/aio_options.h"
#include "aio/block_executor.h"

namespace ds::aio {

class UringBackend final : public BlockExecutor {
 public:
  // Sets up T rings on the calling thread; nullptr (and `why_not`) when the kernel refuses
  // (io_uring_setup: EPERM under seccomp, ENOSYS, io_uring_disabled, ENOMEM) or when built
  // without liburing.
  static std::unique_ptr<UringBackend> create(const AioOptions& options, std::string* why_not);
  ~UringBackend() override;
  UringBackend(const UringBackend&) = delete;
  UringBackend& operator=(const UringBackend&) = delete;

  void execute(std::vector<Block> blocks) override;

  struct Worker;  // one ring + thread (uring_backend.cpp)

 private:
  UringBackend() = default;
  std::vector<std::unique_ptr<Worker>> workers_;
};

// True when this build has the io_uring backend (liburing found at configure time).
bool uring_compiled_in();

}  // namespace ds::aio
