// Exact live bytes of LibTorch CPU tensors, for benchmarks: a CPU allocator that wraps the current
// one (the huge-page allocator when the engine installed it) and counts what is allocated and not
// yet freed, with a resettable peak. Resident-set figures are sticky (freed heap pages stay
// resident); this counts what the tensors hold at each moment, so one step's activation peak can
// be read off as peak − the bytes live before its forward.
#pragma once

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "offload/huge_pages.h"

namespace ds::bench {

class CpuTensorBytes final : public c10::Allocator {
 public:
  // Installs the counter once (after the engine's huge-page allocator, which it then wraps).
  static CpuTensorBytes& install() {
    static CpuTensorBytes* self = [] {
      offload::enable_huge_pages_for_cpu_tensors();
      static CpuTensorBytes counter(c10::GetCPUAllocator());
      c10::SetCPUAllocator(&counter, /*priority=*/100);
      return &counter;
    }();
    return *self;
  }

  int64_t live() const { return live_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(live_.load()); }

  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = inner_->allocate(n);
    void* p = inner.get();
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_[p] = Held{int64_t(n), inner.get_deleter()};
    }
    inner.release_context();  // ours to free now (every CPU allocator here has context == data)
    const int64_t now = live_.fetch_add(int64_t(n)) + int64_t(n);
    int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

 private:
  struct Held {
    int64_t bytes = 0;
    c10::DeleterFnPtr free = nullptr;
  };
  explicit CpuTensorBytes(c10::Allocator* inner) : inner_(inner) {}

  static void release(void* p) {
    CpuTensorBytes& self = install();
    Held h;
    {
      std::lock_guard<std::mutex> lock(self.mu_);
      auto it = self.held_.find(p);
      if (it == self.held_.end()) return;
      h = it->second;
      self.held_.erase(it);
    }
    self.live_.fetch_sub(h.bytes);
    if (h.free) h.free(p);
  }

  c10::Allocator* inner_;
  mutable std::mutex mu_;
  mutable std::unordered_map<void*, Held> held_;
  mutable std::atomic<int64_t> live_{0}, peak_{0};
};

}  // namespace ds::bench
