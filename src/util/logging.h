// Rank-aware logging over spdlog. Messages carry DeepSpeed's "[deepspeed]" flavour; only rank 0
// prints info-level lines unless asked otherwise, so N ranks do not print N copies.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace ds::log {

// Sets the rank used to filter rank-0-only messages (called once the communicator exists).
void set_rank(int rank);
int rank();

// The project's logger ("deepspeed"), created on first use, writing to stderr.
spdlog::logger& logger();

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (rank() == 0) logger().info(f, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (rank() == 0) logger().warn(f, std::forward<Args>(args)...);
}
template <typename... Args>
void warn_all_ranks(fmt::format_string<Args...> f, Args&&... args) {
  logger().warn(f, std::forward<Args>(args)...);
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  logger().error(f, std::forward<Args>(args)...);
}

}  // namespace ds::log
