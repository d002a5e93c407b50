// NcclCommunicator: collectives between GPUs over NCCL (CUDA builds only: DS_WITH_CUDA=ON defines
// DS_WITH_NCCL and compiles nccl_communicator.cpp). Buffers are device pointers. Ranks are the
// mpirun ranks: an MpiCommunicator bootstraps the ncclUniqueId (rank 0 creates it, broadcast) and
// stays alive for rank/size. Each collective is enqueued on the communicator's CUDA stream in issue
// order; its Work completes when a CUDA event recorded after it has fired (a worker thread waits on
// the events in order). bf16 and fp16 are NCCL's own types (ncclBfloat16 / ncclFloat16).
//
// Status: written against the NCCL 2.x API but NOT compiled or run in the CPU-only development
// environment (no CUDA toolkit or NCCL there); the CPU build never includes it.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace ds::comm {

struct NcclOptions {
  int device = -1;         // CUDA device; < 0: the local rank (OMPI_COMM_WORLD_LOCAL_RANK) mod device count
  double timeout_s = -1;   // watchdog, as MpiOptions::timeout_s
};

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const NcclOptions& options = {});
  ~NcclCommunicator() override;

  int rank() const noexcept override;
  int size() const noexcept override;
  Backend backend() const noexcept override { return Backend::Nccl; }

 protected:
  Work launch(const Collective& c) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::comm
