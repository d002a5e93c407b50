// GPT2Config: presets (shapes from Hugging Face's gpt2* configs), validation, parameter count.
#include "models/gpt2_config.h"

#include <fmt/format.h>

#include <cstdio>
#include <utility>

#include "parallel/vocab_range.h"
#include "util/error.h"

namespace ds::models {
namespace {

struct Preset {
  const char* name;
  const char* alias;  // Hugging Face model id
  GPT2Config config;
};

// vocab_size, n_positions, n_embd, n_layer, n_head
const Preset kPresets[] = {
    {"tiny", "", {256, 64, 64, 2, 4}},
    {"small", "gpt2", {50257, 1024, 768, 12, 12}},
    {"medium", "gpt2-medium", {50257, 1024, 1024, 24, 16}},
    {"large", "gpt2-large", {50257, 1024, 1280, 36, 20}},
    {"xl", "gpt2-xl", {50257, 1024, 1600, 48, 25}},
};

}  // namespace

GPT2Config GPT2Config::preset(const std::string& name) {
  for (const auto& p : kPresets) {
    if (name == p.name || (p.alias[0] != '\0' && name == p.alias)) return p.config;
  }
  std::string allowed;
  for (const auto& n : preset_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw ConfigError("model", "unknown GPT-2 preset \"" + name + "\" (allowed: " + allowed + ")");
}

std::vector<std::string> GPT2Config::preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  for (const auto& p : kPresets) {
    if (p.alias[0] != '\0') names.emplace_back(p.alias);
  }
  return names;
}

int64_t GPT2Config::num_parameters() const {
  const int64_t c = n_embd;
  // Per block: ln_1 (2C) + c_attn (3C²+3C) + attn.c_proj (C²+C) + ln_2 (2C) + c_fc (4C²+4C)
  // + mlp.c_proj (4C²+C) = 12C² + 13C.
  const int64_t per_block = 12 * c * c + 13 * c;
  return vocab_size * c + n_positions * c + n_layer * per_block + 2 * c;
}

std::string GPT2Config::describe() const {
  char count[32];
  std::snprintf(count, sizeof(count), "%.2fM", static_cast<double>(num_parameters()) / 1e6);
  return "GPT-2 n_layer=" + std::to_string(n_layer) + " n_head=" + std::to_string(n_head) +
         " n_embd=" + std::to_string(n_embd) + " vocab_size=" + std::to_string(vocab_size) +
         " n_positions=" + std::to_string(n_positions) + " (" + count + " parameters)";
}

std::vector<int64_t> GPT2Config::parameter_sizes(int64_t tensor_parallel, bool vocab_parallel) const {
  const int64_t C = n_embd, t = tensor_parallel;
  if (t < 1 || n_head % t != 0)
    throw ConfigError("tensor_parallel.autotp_size", fmt::format("{} does not divide GPT-2's n_head {} (AutoTP keeps "
                                                                 "whole heads on each rank)",
                                                                 t, n_head));
  // The vocab-parallel embedding: group rank 0's range, the largest (parallel/vocab_parallel.h).
  const int64_t rows = vocab_parallel && t > 1 ? parallel::vocab_range(vocab_size, int(t), 0).size() : vocab_size;
  std::vector<int64_t> s{rows * C, n_positions * C};
  // ln_1, c_attn (column: weight and bias cut), attn.c_proj (row: weight cut), ln_2, c_fc (column),
  // mlp.c_proj (row); AutoTP's cuts (parallel/auto_tp.h).
  for (int64_t l = 0; l < n_layer; ++l)
    for (int64_t n : {C, C, 3 * C * C / t, 3 * C / t, C * C / t, C, C, C, 4 * C * C / t, 4 * C / t, 4 * C * C / t, C})
      s.push_back(n);
  s.push_back(C);  // ln_f
  s.push_back(C);
  return s;
}

void GPT2Config::validate() const {
  const std::pair<const char*, int64_t> fields[] = {{"vocab_size", vocab_size},
                                                    {"n_positions", n_positions},
                                                    {"n_embd", n_embd},
                                                    {"n_layer", n_layer},
                                                    {"n_head", n_head}};
  for (const auto& [field, value] : fields) {
    if (value <= 0) {
      throw ConfigError(field, "must be > 0, got " + std::to_string(value));
    }
  }
  if (n_embd % n_head != 0) {
    throw ConfigError("n_embd", std::to_string(n_embd) + " is not divisible by n_head = " +
                                    std::to_string(n_head) +
                                    " (each head gets n_embd / n_head channels)");
  }
}

}  // namespace ds::models
