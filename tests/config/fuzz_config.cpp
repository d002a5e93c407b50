// libFuzzer target for the config loader (ds::load_config_text: parse, sections, validation, "auto")
// at world sizes 1, 3 and 8: any bytes must load or throw a ds::Error; anything else (another
// exception, a crash, a sanitizer report) is a bug. A config that loads must render its reports,
// and its json_text must load again to the same resolved values. Built by hand with clang as
// fuzz_config (docs/config.md has the recipe); without libFuzzer, this file's main() replays a
// corpus on every build (valid_* must load at world size 1, bad_* must be rejected).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/loader.h"
#include "config/report.h"
#include "util/error.h"
#include "util/logging.h"
#include "../checkpoint/fuzz_replay.h"

namespace {

// "ok" (loads at world size 1), or the first ds::Error's message; aborts on anything else.
std::string check(const uint8_t* data, size_t size) {
  // Warnings are kept in Config::warnings; printing each would be most of the fuzzer's time.
  static const bool quiet = (ds::log::logger().set_level(spdlog::level::off), true);
  (void)quiet;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string outcome;
  for (int world : {1, 3, 8}) {
    try {
      const ds::Config c = ds::load_config_text(text, world, "fuzz.json");
      (void)ds::render_config_report(c);
      (void)ds::render_config_report_json(c);
      (void)ds::render_engine_configuration(c);
      const ds::Config again = ds::load_config_text(c.json_text, world, "fuzz-again.json");
      if (again.resolved.size() != c.resolved.size()) std::abort();
      for (size_t i = 0; i < c.resolved.size(); ++i)
        if (again.resolved[i].path != c.resolved[i].path || again.resolved[i].value != c.resolved[i].value) std::abort();
      if (world == 1) outcome = "ok";
    } catch (const ds::Error& e) {
      if (world == 1) outcome = e.what();
    }
  }
  return outcome;
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
  return ds::testing::replay_corpus(argv[1], [](const uint8_t* data, size_t size, const std::string&) {
    return check(data, size);
  });
}
#endif
