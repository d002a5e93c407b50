// Test hosts for a benchmark (scripts/testhosts.sh, root): network namespaces joined by real TCP
// links, up while the object lives, with the mpirun options that start ranks on them and tc tbf to
// shape their links. Shared by onebit --slow-link and multihost.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace ds::bench {

class TestHosts {
 public:
  // Brings up `count` hosts with their own state folder; throws (saying why) where they cannot be made.
  TestHosts(int count, std::string state)
      : count_(count), state_(std::move(state)), script_(std::filesystem::absolute("scripts/testhosts.sh").string()) {
    if (run(fmt::format("bash {} up {} > /dev/null", script_, count)) != 0)
      throw std::runtime_error(fmt::format("needs test hosts (root, ip netns): {} up {} failed", script_, count));
    std::ifstream in(state_ + "/mpirun_options");
    options_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    while (!options_.empty() && (options_.back() == '\n' || options_.back() == ' ')) options_.pop_back();
  }
  ~TestHosts() { run(fmt::format("bash {} down", script_)); }
  TestHosts(const TestHosts&) = delete;
  TestHosts& operator=(const TestHosts&) = delete;

  // mpirun (as root) with the hosts' options, before the program: every host, or `ranks` on `host`.
  std::string mpirun_all() const {
    return fmt::format("{}mpirun {} --hostfile {}/hostfile -np {} ", kRoot, options_, state_, count_);
  }
  std::string mpirun_on(const std::string& host, int ranks) const {
    return fmt::format("{}mpirun {} --host {} -np {} ", kRoot, options_, host, ranks);
  }
  // Every host's link (its inbound traffic: both directions of each pair) limited to `rate` (tc tbf).
  void shape_links(const std::string& rate) const {
    for (int i = 0; i < count_; ++i)
      if (run(fmt::format("tc qdisc add dev dsv{} root tbf rate {} burst 256kb latency 400ms", i, rate)) != 0)
        throw std::runtime_error(fmt::format("tc tbf on dsv{} failed", i));
  }

  static constexpr const char* kRoot = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

 private:
  int run(const std::string& cmd) const { return std::system(("DS_TESTHOSTS_DIR=" + state_ + " " + cmd).c_str()); }

  int count_;
  std::string state_, script_, options_;
};

}  // namespace ds::bench
