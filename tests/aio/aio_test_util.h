// Shared helpers for aio_tests: scratch folders, byte patterns, a log capture (tests/log_capture.h), and running a
// check in a forked child (for seccomp filters, dropped privileges and other process-wide state).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "../log_capture.h"
#include "util/logging.h"

namespace ds::aio::test {

// A fresh folder, removed with its contents at scope end.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent = "/tmp") {
    std::string tmpl = parent + "/ds_aio_test_XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    path_ = p ? std::string(p) : std::string();
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

// Deterministic non-repeating bytes (a repeating pattern would hide misplaced blocks).
inline void fill_pattern(std::byte* p, int64_t n, uint32_t seed) {
  uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<std::byte>(x & 0xFF);
  }
}

using ds::test::LogCapture;

// Runs `body` in a forked child and returns its exit status (0 = success). Anything that changes
// process-wide state irreversibly (seccomp, setuid) happens there.
inline int run_in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = body();
    } catch (...) {
      rc = 98;
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace ds::aio::test
