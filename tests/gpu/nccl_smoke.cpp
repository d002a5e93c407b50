// The GPU parts that build without a CUDA LibTorch (DS_WITH_NCCL): the NCCL communicator and pinned
// host buffers. Without arguments it only proves they link (what CI checks where the CUDA toolkit
// is installed). With --run it is the smoke test to run on a GPU machine:
//   mpirun -np 2 build-nccl/tests/gpu/nccl_smoke --run
// each rank pins a host buffer, copies it to its device, all-reduces over NCCL, copies back and
// checks the sum; exit 0 and "nccl_smoke: ok" when every value is right.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

#include "comm/nccl_communicator.h"
#include "offload/pinned_buffer.h"

namespace {

int run() {
  constexpr int kCount = 1 << 20;
  ds::comm::NcclCommunicator comm;
  ds::offload::PinnedHostBuffer host(kCount * sizeof(float));
  auto* values = static_cast<float*>(host.data());
  for (int i = 0; i < kCount; ++i) values[i] = float(comm.rank() + 1);
  float* device = nullptr;
  if (cudaMalloc(&device, kCount * sizeof(float)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
  cudaMemcpy(device, values, kCount * sizeof(float), cudaMemcpyHostToDevice);
  comm.all_reduce(ds::comm::Buffer(device, kCount));
  cudaMemcpy(values, device, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(device);
  const float want = float(comm.size() * (comm.size() + 1) / 2);
  for (int i = 0; i < kCount; ++i)
    if (values[i] != want) {
      std::fprintf(stderr, "nccl_smoke: rank %d element %d is %g, want %g\n", comm.rank(), i, values[i], want);
      return 1;
    }
  std::printf("nccl_smoke: ok (rank %d of %d, %d floats all-reduced)\n", comm.rank(), comm.size(), kCount);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--run") != 0) {
    std::printf("nccl_smoke: NcclCommunicator and PinnedHostBuffer linked; pass --run on a GPU machine\n");
    return 0;
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_smoke: %s\n", e.what());
    return 1;
  }
}
