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

#include "format/safetensors.h"
#include "fuzz_replay.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  return ds::testing::replay_corpus(argv[1], [](const uint8_t* data, size_t size, const std::string& name) {
    LLVMFuzzerTestOneInput(data, size);
    try {
      ds::format::parse_header(data, size, size, name);
      return std::string("ok");
    } catch (const ds::IoError& e) {
      return std::string(e.what());
    }
  });
}
