// tests/faults: helpers for the fault regression tests (issue 22). Each test reproduces one fault as a
// user would meet it — a real tool run as a real process, or the public API — and asserts the message,
// the exit code and what is left on disk.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

namespace ds::faults {

namespace fs = std::filesystem;

// A built executable of this tree (tools are in build/tools).
inline std::string tool(const std::string& name) { return std::string(DS_BINARY_DIR) + "/tools/" + name; }
inline std::string source_path(const std::string& rel) { return std::string(DS_SOURCE_DIR) + "/" + rel; }

struct RunResult {
  int exit_code = -1;  // the process's exit status; 128+N when killed by signal N
  std::string output;  // stdout and stderr together
};

// Runs `cmd` through /bin/sh with stderr folded into stdout, under `timeout` so a hang fails the test.
inline RunResult run(const std::string& cmd, int timeout_s = 300) {
  RunResult r;
  const std::string full = "timeout -k 5 " + std::to_string(timeout_s) + " sh -c '" + cmd + "' 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
}

// Environment for Open MPI as root with more ranks than cores (DESIGN §2).
inline std::string mpirun(int np) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np " + std::to_string(np) +
         " --oversubscribe --bind-to none";
}

// A fresh directory removed when the test ends.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "fault") {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("ds_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The quickest ds-train there is: a 2-layer, 32-wide GPT-2 on sequences of 16 tokens.
inline std::string tiny_train(const std::string& args) {
  return tool("ds-train") + " --layers 2 --embd 32 --heads 2 --seq 16 --progress off " + args;
}

}  // namespace ds::faults
