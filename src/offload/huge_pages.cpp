#include "offload/huge_pages.h"

#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <fstream>
#include <mutex>

#include "util/host_alloc.h"

namespace ds::offload {
namespace {

class HugePageCpuAllocator final : public c10::Allocator {
 public:
  explicit HugePageCpuAllocator(c10::Allocator* small) : small_(small) {}

  c10::DataPtr allocate(size_t bytes) const override {
    if (bytes < kHugePageMinBytes) return small_->allocate(bytes);
    const size_t cap = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = alloc_host(cap, kHugePage);
    if (p == nullptr) return small_->allocate(bytes);  // let LibTorch report the failure its way
    return {p, p, &free_host, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return small_->raw_deleter(); }

 private:
  static void free_host(void* p) { std::free(p); }
  c10::Allocator* small_;
};

}  // namespace

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "";
  const auto open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

std::string enable_huge_pages_for_cpu_tensors() {
  static std::once_flag once;
  static std::string said;  // the same line for every caller
  std::call_once(once, [&] {
    const char* env = std::getenv("DS_HUGE_PAGES");
    const std::string mode = thp_mode();
    if (env != nullptr && std::string(env) == "0") {
      said = "host allocations: 4 KiB pages (DS_HUGE_PAGES=0)";
      return;
    }
    if (mode.empty() || mode == "never") {
      said = "host allocations: 4 KiB pages (transparent huge pages are " + (mode.empty() ? std::string("unavailable") : mode) + ")";
      return;
    }
    // Lives for the whole process: tensors anywhere may still point at it.
    static HugePageCpuAllocator allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    said = "host allocations of 4 MiB or more use 2 MiB transparent huge pages (THP mode " + mode +
           "; first touch about 30x cheaper; DS_HUGE_PAGES=0 turns this off)";
  });
  return said;
}

}  // namespace ds::offload
