// GPT2Config: the shape of a GPT-2 family model, its presets and its analytic parameter count.
// Plain header (no torch) so config code and tools can include it cheaply; gpt2.h includes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::models {

struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // also the longest training sequence the model accepts
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;

  // "tiny" (tests: vocab 256, 64 positions, 64 wide, 2 layers, 4 heads), "small" (124M),
  // "medium" (355M), "large" (774M), "xl" (1.5B); the Hugging Face names "gpt2", "gpt2-medium",
  // "gpt2-large", "gpt2-xl" are aliases. Unknown name → ds::ConfigError listing the allowed.
  static GPT2Config preset(const std::string& name);
  static std::vector<std::string> preset_names();

  // Exact count of the model's parameters (tied lm head counted once):
  // V·C + P·C + L·(12·C² + 13·C) + 2·C.
  int64_t num_parameters() const;

  // The element count of each parameter tensor, in the model's named_parameters() order (wte, wpe,
  // then per block ln_1, attn, ln_2, mlp; ln_f): what memory estimates size buffers from. With
  // tensor_parallel > 1, one rank's counts after AutoTP cut c_attn, c_fc and both c_proj
  // (ConfigError naming tensor_parallel.autotp_size when the heads do not divide).
  std::vector<int64_t> parameter_sizes(int64_t tensor_parallel = 1, bool vocab_parallel = false) const;

  // One line: "GPT-2 n_layer=12 n_head=12 n_embd=768 vocab_size=50257 n_positions=1024 (124.44M parameters)".
  std::string describe() const;

  // Every field > 0 and n_embd % n_head == 0; otherwise ds::ConfigError naming the field.
  void validate() const;
};

}  // namespace ds::models
