// The hung-collective watchdog (see watchdog.h).
#include "comm/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "util/error.h"

namespace ds::comm {

double comm_timeout_from_env(double fallback) {
  const char* v = std::getenv("DS_COMM_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  DS_CHECK(end != v && *end == '\0' && t >= 0, CommError,
           std::string("DS_COMM_TIMEOUT_S=\"") + v +
               "\" is not a number of seconds >= 0 (0 disables the collective watchdog)");
  return t;
}

Watchdog::Watchdog(double timeout_s, Probe probe, OnTimeout on_timeout)
    : timeout_s_(timeout_s), probe_(std::move(probe)), on_timeout_(std::move(on_timeout)) {
  DS_ASSERT(timeout_s_ > 0, "Watchdog needs a positive timeout");
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::loop() {
  const auto period = std::chrono::duration<double>(std::min(1.0, timeout_s_ / 4));
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, period, [&] { return stopping_; });
    if (stopping_) return;
    const std::optional<double> running = probe_();
    if (running && *running > timeout_s_) {
      lock.unlock();
      on_timeout_(*running);
      return;
    }
  }
}

}  // namespace ds::comm
