// Helpers shared by the checkpoint tests: a self-removing temp directory, whole-file I/O, crafting
// a safetensors file from a JSON text, and catching the IoError message of a call.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "util/error.h"

namespace ds::test {

// EXPECT that `msg` contains `part`, printing both when it does not.
#define EXPECT_CONTAINS(msg, part) \
  EXPECT_NE(std::string(msg).find(part), std::string::npos) << "message: " << (msg) << "\nwanted: " << (part)

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ds_ckpt_test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

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

// The 8-byte little-endian length prefix of `n`.
inline std::string length_prefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xFF);
  return out;
}

// A file image: prefix, `json` verbatim (no padding), then `data_bytes` bytes of data.
inline std::string craft(const std::string& json, size_t data_bytes = 0) {
  return length_prefix(json.size()) + json + std::string(data_bytes, '\x5a');
}

// The IoError message of parse_header over `image` (whole file in memory), or "" if it parses.
inline std::string parse_error(const std::string& image, const std::string& source = "bad.safetensors") {
  try {
    format::parse_header(reinterpret_cast<const uint8_t*>(image.data()), image.size(), image.size(), source);
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

// The IoError message of running `fn`, or "" if it returned.
template <typename Fn>
std::string io_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

}  // namespace ds::test
