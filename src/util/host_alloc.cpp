#include "util/host_alloc.h"

#include <sys/mman.h>

#include <cstdlib>

namespace ds {

void* alloc_host(std::size_t bytes, std::size_t alignment) {
  const bool huge = bytes >= kHugePageMinBytes;
  if (huge && alignment < kHugePage) alignment = kHugePage;
  void* p = nullptr;
  if (::posix_memalign(&p, alignment, bytes) != 0) return nullptr;
  if (huge) (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: a refusal is harmless
  return p;
}

}  // namespace ds
