// PinnedHostBuffer: page-locked host memory from the CUDA runtime (cudaHostAlloc), the staging
// buffers of ZeRO-Offload and ZeRO-Infinity on a GPU: copies between them and the device run at
// full PCIe speed and can overlap compute, which pageable memory cannot. Torch-free (raw bytes), so
// it builds with the CUDA toolkit alone: target ds_pinned, only with -DDS_WITH_NCCL=ON (or
// DS_WITH_CUDA). The CPU build keeps using offload/host_memory.h (LibTorch's pinned allocator when a
// GPU is present). Compiled and linked in CI where the toolkit is installed; not yet run on a GPU.
#pragma once

#include <cstddef>

namespace ds::offload {

class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  // `bytes` of page-locked memory, mapped into the device's address space when `mapped` (so a kernel
  // may read it directly). Throws ds::OutOfMemory naming the size and the locked-memory limit when
  // the driver refuses, ds::NotSupported when no CUDA driver or device is present.
  explicit PinnedHostBuffer(std::size_t bytes, bool mapped = false);
  ~PinnedHostBuffer();
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return bytes_; }
  // The device pointer of a mapped buffer (cudaHostGetDevicePointer); nullptr when not mapped.
  void* device_pointer() const;

 private:
  void release() noexcept;

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool mapped_ = false;
};

}  // namespace ds::offload
