#include "util/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <mutex>

namespace ds::log {
namespace {
std::atomic<int> g_rank{0};  // process-wide by nature: one process is one rank
}

void set_rank(int r) { g_rank = r; }
int rank() { return g_rank; }

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> lg = [] {
    auto l = spdlog::stderr_color_mt("deepspeed");
    l->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] [deepspeed] %v");
    return l;
  }();
  return *lg;
}

}  // namespace ds::log
