// PinnedHostBuffer over the CUDA runtime (see pinned_buffer.h). Built only with DS_WITH_NCCL.
#include "offload/pinned_buffer.h"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "util/error.h"
#include "util/system_info.h"

namespace ds::offload {

PinnedHostBuffer::PinnedHostBuffer(std::size_t bytes, bool mapped) : bytes_(bytes), mapped_(mapped) {
  if (bytes == 0) return;
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  DS_CHECK(probe == cudaSuccess && devices > 0, NotSupported,
           std::string("pinned host memory needs a CUDA device and driver (cudaGetDeviceCount: ") +
               cudaGetErrorString(probe) + "); set pin_memory: false or run on a GPU machine");
  const unsigned flags = mapped ? (cudaHostAllocPortable | cudaHostAllocMapped) : cudaHostAllocPortable;
  const cudaError_t rc = cudaHostAlloc(&data_, bytes, flags);
  if (rc != cudaSuccess) {
    data_ = nullptr;
    (void)cudaGetLastError();  // clear the sticky error so later calls on this thread are not blamed
    throw OutOfMemory("cudaHostAlloc of " + std::to_string(bytes) + " bytes of pinned host memory failed (" +
                      cudaGetErrorString(rc) + "); the locked-memory limit (ulimit -l) is " +
                      std::to_string(memlock_limit_bytes()) +
                      " bytes: raise it, lower the offloaded state, or set pin_memory: false");
  }
}

PinnedHostBuffer::~PinnedHostBuffer() { release(); }

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      mapped_(std::exchange(other.mapped_, false)) {}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    mapped_ = std::exchange(other.mapped_, false);
  }
  return *this;
}

void* PinnedHostBuffer::device_pointer() const {
  if (!mapped_ || data_ == nullptr) return nullptr;
  void* device = nullptr;
  const cudaError_t rc = cudaHostGetDevicePointer(&device, data_, 0);
  DS_CHECK(rc == cudaSuccess, Error, std::string("cudaHostGetDevicePointer: ") + cudaGetErrorString(rc));
  return device;
}

void PinnedHostBuffer::release() noexcept {
  if (data_ != nullptr) (void)cudaFreeHost(data_);  // destructors never throw
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace ds::offload
