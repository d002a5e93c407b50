// CountingCpuAllocator: wraps LibTorch's CPU allocator while a Scope lives and counts the bytes
// allocated in the scope and not yet freed (live) and their maximum (peak). ds-autotune's model
// profile measures a forward's activation memory with it (runtime/autotuning_probe.h); tests
// measure what activation checkpointing keeps.
#pragma once

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace ds {

// The instance is never destroyed: tensors it allocated may be freed at any time later, and their
// deleter updates its counters.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  class Scope {
   public:
    Scope() : base_(c10::GetCPUAllocator()) {
      auto& a = instance();
      a.base_ = base_;
      a.live_ = 0;
      a.peak_ = 0;
      c10::SetCPUAllocator(&a, kPriority);
    }
    ~Scope() { c10::SetCPUAllocator(base_, kPriority); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    int64_t live() const { return instance().live_.load(); }
    int64_t peak() const { return instance().peak_.load(); }

   private:
    c10::Allocator* base_;
  };

  // The returned DataPtr's context is its data pointer, as Allocator::raw_allocate asserts (oneDNN's
  // scratch buffers, which bf16 matrix products take, come through raw_allocate/raw_deallocate):
  // the base allocation and its size wait in a table keyed by that pointer.
  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    if (data == nullptr) return inner;  // zero bytes: nothing to count or free
    const auto bytes = static_cast<int64_t>(n);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_allocations_.emplace(data, Allocation{std::move(inner), bytes});
    }
    const int64_t now = live_ += bytes;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return c10::DataPtr(data, data, &free_data, device);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_data; }

 private:
  static constexpr uint8_t kPriority = 1;  // above the default allocator's 0
  struct Allocation {
    c10::DataPtr inner;
    int64_t bytes;
  };
  static CountingCpuAllocator& instance() {
    static auto* a = new CountingCpuAllocator();  // leaked on purpose (see the class comment)
    return *a;
  }
  static void free_data(void* data) {
    auto& a = instance();
    Allocation gone;
    {
      std::lock_guard<std::mutex> lock(a.mutex_);
      auto it = a.live_allocations_.find(data);
      if (it == a.live_allocations_.end()) return;  // not ours: never happens for our DataPtrs
      gone = std::move(it->second);
      a.live_allocations_.erase(it);
    }
    a.live_ -= gone.bytes;  // `gone.inner` frees the base allocation on leaving
  }
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, Allocation> live_allocations_;
  c10::Allocator* base_ = nullptr;
  mutable std::atomic<int64_t> live_{0}, peak_{0};
};

}  // namespace ds
