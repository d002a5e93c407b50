// libFuzzer target for the checkpoint manifest reader (checkpoint::manifest_from_json after JSON
// parsing): any bytes must parse or throw ds::IoError; anything else is a bug. A manifest that
// parses must re-encode (to_json) and parse again to the same pieces. Built with -DDS_FUZZ=ON and
// clang as fuzz_manifest; without libFuzzer, this file's main() replays a corpus (valid_* must
// parse, bad_* must be rejected) on every build.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "util/error.h"

namespace {

// "ok", or the IoError's message; aborts on any other exception (libFuzzer saves the input).
std::string check(const uint8_t* data, size_t size) {
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "not JSON";
  try {
    const auto m = ds::checkpoint::manifest_from_json(j, "fuzz");
    const auto again = ds::checkpoint::manifest_from_json(ds::checkpoint::to_json(m), "fuzz-again");
    if (again.params.size() != m.params.size()) std::abort();
    for (size_t i = 0; i < m.params.size(); ++i)
      if (again.params[i].name != m.params[i].name || again.params[i].pieces.size() != m.params[i].pieces.size())
        std::abort();
    return "ok";
  } catch (const ds::IoError& e) {
    return e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)check(data, size);
  return 0;
}

#ifndef DS_LIBFUZZER
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
    const std::string outcome = check(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const std::string name = path.filename().string();
    const bool wrong = (name.rfind("valid_", 0) == 0 && outcome != "ok") || (name.rfind("bad_", 0) == 0 && outcome == "ok");
    std::printf("%s %s: %s\n", wrong ? "FAIL" : "pass", name.c_str(), outcome.c_str());
    failures += wrong;
  }
  std::printf("%zu files, %d unexpected outcomes\n", files.size(), failures);
  return files.empty() || failures ? 1 : 0;
}
#endif
