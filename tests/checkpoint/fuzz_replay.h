// Corpus replay shared by the fuzz targets' non-libFuzzer builds: every file of a directory goes
// through `outcome` ("ok" or the rejection message); files named valid_* must give "ok" and bad_*
// must not. Returns the process exit code (non-zero for an empty corpus or an unexpected outcome).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

namespace ds::testing {

inline int replay_corpus(const char* dir, const std::function<std::string(const uint8_t*, size_t, const std::string&)>& outcome) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  int failures = 0;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const std::string name = path.filename().string();
    const std::string got = outcome(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
    const bool wrong = (name.rfind("valid_", 0) == 0 && got != "ok") || (name.rfind("bad_", 0) == 0 && got == "ok");
    std::printf("%s %s: %s\n", wrong ? "FAIL" : "pass", name.c_str(), got.c_str());
    failures += wrong;
  }
  std::printf("%zu files, %d unexpected outcomes\n", files.size(), failures);
  return files.empty() || failures ? 1 : 0;
}

}  // namespace ds::testing
