// NcclCommunicator: collectives between GPUs over NCCL (only with -DDS_WITH_NCCL=ON, or DS_WITH_CUDA:
// the CUDA toolkit and NCCL, no CUDA LibTorch needed). Buffers are device pointers. Ranks are the
// mpirun ranks: an MpiCommunicator bootstraps the ncclUniqueId (rank 0 creates it, broadcast) and
// stays alive for rank/size. Each collective is enqueued on the communicator's CUDA stream in issue
// order; its Work completes when a CUDA event recorded after it has fired (a worker thread waits on
// the events in order). bf16 and fp16 are NCCL's own types (ncclBfloat16 / ncclFloat16).
//
// Status (docs/gpu.md): compiled and linked against CUDA 13 / NCCL 2 by the gpu_nccl_build ctest
// wherever the toolkit is installed, but NOT yet run on a GPU; tests/gpu/nccl_smoke.cpp --run is the
// first check to run on one. split() is not implemented for NCCL yet (NotSupported).
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
