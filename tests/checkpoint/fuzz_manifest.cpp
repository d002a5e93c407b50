// libFuzzer target for the checkpoint manifest reader (checkpoint::manifest_from_json after JSON
// parsing): any bytes must parse or throw ds::IoError; anything else is a bug. A manifest that
// parses must re-encode (to_json) and parse again to the same pieces and checksums. Built with -DDS_FUZZ=ON and
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
#include "fuzz_replay.h"

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
    if (again.checksums.size() != m.checksums.size()) std::abort();
    for (const auto& [file, sums] : m.checksums) {
      const auto& other = again.checksums.at(file);
      if (other.size != sums.size || other.header != sums.header || other.chunk_bytes != sums.chunk_bytes ||
          other.tensors != sums.tensors)
        std::abort();
    }
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
  return ds::testing::replay_corpus(argv[1], [](const uint8_t* data, size_t size, const std::string&) { return check(data, size); });
}
#endif
