// CountingCpuAllocator: wraps LibTorch's CPU allocator while a Scope lives and counts the bytes
// allocated in the scope and not yet freed (live) and their maximum (peak). ds-autotune's model
// profile measures a forward's activation memory with it (runtime/autotuning_probe.h); tests
// measure what activation checkpointing keeps.
#pragma once

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>
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

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    auto* ctx = new Ctx{std::move(inner), static_cast<int64_t>(n)};
    const int64_t now = live_ += ctx->bytes;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return c10::DataPtr(data, ctx, &free_ctx, device);
  }

 private:
  static constexpr uint8_t kPriority = 1;  // above the default allocator's 0
  struct Ctx {
    c10::DataPtr inner;
    int64_t bytes;
  };
  static CountingCpuAllocator& instance() {
    static auto* a = new CountingCpuAllocator();  // leaked on purpose (see the class comment)
    return *a;
  }
  static void free_ctx(void* p) {
    auto* ctx = static_cast<Ctx*>(p);
    instance().live_ -= ctx->bytes;
    delete ctx;
  }
  c10::Allocator* base_ = nullptr;
  mutable std::atomic<int64_t> live_{0}, peak_{0};
};

}  // namespace ds
