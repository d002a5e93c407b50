// A 4 KiB-aligned, move-only host buffer: what O_DIRECT needs from memory (the address, and the
// length of every request, aligned to the device's logical block; 4 KiB covers every SSD).
// Its capacity is always a whole number of 4 KiB pages, so a request whose length is not a
// multiple of 4 KiB can still move a padded last block through it (see aio_engine.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace ds::aio {

inline constexpr int64_t kAlignment = 4096;

// Rounds `n` up to a multiple of kAlignment.
constexpr int64_t align_up(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
constexpr bool is_aligned(int64_t n) { return n % kAlignment == 0; }
inline bool is_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(kAlignment) == 0;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // `bytes` usable bytes; the allocation is align_up(bytes) and zero-filled (padding included, so
  // a padded write never leaks old heap contents into a file). Throws ds::OutOfMemory.
  explicit AlignedBuffer(int64_t bytes);
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { release(); }

  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }
  template <typename T>
  T* as() noexcept { return reinterpret_cast<T*>(data_); }
  int64_t size() const noexcept { return size_; }          // bytes asked for
  int64_t capacity() const noexcept { return capacity_; }  // align_up(size)
  bool empty() const noexcept { return data_ == nullptr; }

 private:
  void release() noexcept;

  std::byte* data_ = nullptr;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
};

}  // namespace ds::aio
