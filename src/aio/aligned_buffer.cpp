#include "aio/aligned_buffer.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "util/error.h"
#include "util/host_alloc.h"

namespace ds::aio {

AlignedBuffer::AlignedBuffer(int64_t bytes) {
  DS_ASSERT(bytes >= 0, "negative buffer size");
  if (bytes == 0) return;
  const int64_t cap = align_up(bytes);
  void* p = alloc_host(static_cast<size_t>(cap), static_cast<size_t>(kAlignment));  // huge pages when large
  DS_CHECK(p != nullptr, OutOfMemory,
           "aio: cannot allocate a " + std::to_string(cap) + "-byte aligned I/O buffer");
  std::memset(p, 0, static_cast<size_t>(cap));
  data_ = static_cast<std::byte*>(p);
  size_ = bytes;
  capacity_ = cap;
}

void AlignedBuffer::release() noexcept {
  std::free(data_);
  data_ = nullptr;
  size_ = capacity_ = 0;
}

}  // namespace ds::aio
