// Host allocations that ask for transparent huge pages when large. On a VM a first touch costs a
// page fault per 4 KiB page (measured here: 0.5 GB/s zero-filling fresh memory, against 14 GB/s
// with 2 MiB pages); the big short-lived buffers of ZeRO stage 3 and NVMe offload pay it per layer.
// Plain C++.
#pragma once

#include <cstddef>

namespace ds {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;
inline constexpr std::size_t kHugePageMinBytes = std::size_t{4} << 20;

// `bytes` with at least `alignment` (a power of two >= sizeof(void*)); from kHugePageMinBytes up,
// 2 MiB-aligned and advised MADV_HUGEPAGE (advice: where THP is off it is ignored). nullptr on
// failure. Free with std::free.
void* alloc_host(std::size_t bytes, std::size_t alignment);

}  // namespace ds
