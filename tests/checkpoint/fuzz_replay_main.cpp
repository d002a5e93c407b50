// Replays fuzz_safetensors_header over a corpus directory without libFuzzer, so every build (gcc,
// no sanitizers) smoke-runs the seeds: each file goes through LLVMFuzzerTestOneInput, and the
// naming convention is checked too: valid_* must parse, bad_* must throw ds::IoError.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[1]))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  int failures = 0;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    LLVMFuzzerTestOneInput(data, bytes.size());
    const std::string name = path.filename().string();
    std::string outcome = "ok";
    try {
      ds::checkpoint::parse_header(data, bytes.size(), bytes.size(), name);
    } catch (const ds::IoError& e) {
      outcome = e.what();
    }
    const bool want_ok = name.rfind("valid_", 0) == 0;
    const bool want_bad = name.rfind("bad_", 0) == 0;
    const bool wrong = (want_ok && outcome != "ok") || (want_bad && outcome == "ok");
    std::printf("%s %s: %s\n", wrong ? "FAIL" : "pass", name.c_str(), outcome.c_str());
    failures += wrong;
  }
  std::printf("%zu files, %d unexpected outcomes\n", files.size(), failures);
  return files.empty() || failures ? 1 : 0;
}
