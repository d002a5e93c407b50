// Helpers shared by the profiling tests: a self-removing temp directory, whole-file reads, and
// running the checked-in Python reference scripts (tests/profiling/*.py) with /usr/bin/python3.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "profiling/monitor.h"

namespace ds::test {

#define EXPECT_CONTAINS(msg, part) \
  EXPECT_NE(std::string(msg).find(part), std::string::npos) << "message: " << (msg) << "\nwanted: " << (part)

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ds_prof_test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::string> sorted_entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline const char* kPython = "/usr/bin/python3";

// True when /usr/bin/python3 runs and can import every module of `imports` ("csv", "google.protobuf").
inline bool python_has(const std::string& imports) {
  if (::access(kPython, X_OK) != 0) return false;
  const std::string cmd = std::string(kPython) + " -c 'import " + imports + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// Runs tests/profiling/<script> with `args`; returns the exit code and stdout+stderr.
inline std::pair<int, std::string> run_python_script(const TempDir& dir, const std::string& script,
                                                     const std::string& args) {
  const std::string out = dir.file("python.out");
  const std::string cmd = std::string(kPython) + " " + DS_SOURCE_DIR + "/tests/profiling/" + script + " " + args +
                          " >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out)};
}

// Events as the reference scripts read them: one "tag<TAB>value as C99 hex float<TAB>step<TAB>kind"
// line each, so every double crosses over exactly (Python's float.fromhex reads %a output).
inline void write_events_file(const std::string& path, const std::vector<MonitorEvent>& events) {
  std::string text;
  for (const MonitorEvent& e : events) {
    char hex[64];
    std::snprintf(hex, sizeof hex, "%a", e.value);
    text += e.tag + "\t" + hex + "\t" + std::to_string(e.step) + "\t" + (e.kind == ValueKind::Int ? "int" : "float") + "\n";
  }
  write_file(path, text);
}

}  // namespace ds::test
