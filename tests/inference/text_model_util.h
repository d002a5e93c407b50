// A tiny Hugging Face folder with a real tokenizer, for the text-level tests (Pipeline::generate_text,
// ds-generate): the toy byte-level tokenizer of tests/data (bytes 0-255, special tokens 256-258)
// with BPE merges of common letter pairs added (ids 259-279), so some tokens are two or three
// characters and a stop string can end inside one; a random GPT-2 over all 280 ids beside it.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "../data/sft_test_util.h"
#include "inference_test_util.h"

namespace ds::inference::testing {

inline constexpr int64_t kTextModelVocab = 280;

// Merges in rank order; "th e" needs "t h" first. Ids from 259 on, in this order.
inline void add_letter_merges(const std::filesystem::path& dir) {
  const char* merges[] = {"t h", "th e", "h e", "i n", "e r", "a n", "r e", "o n", "e n", "a t", "o u",
                          "e s", "o r", "i s", "i t", "a l", "a r", "s t", "t o", "n d", "e d"};
  nlohmann::json tok = nlohmann::json::parse(std::ifstream(dir / "tokenizer.json"));
  auto& model = tok["model"];
  int64_t id = 259;
  for (const std::string m : merges) {
    model["merges"].push_back(m);
    model["vocab"][m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1)] = id++;
  }
  std::ofstream(dir / "tokenizer.json") << tok.dump();
}

// <parent>/text-gpt2: config.json + model.safetensors (GPT-2, 64 positions, wide random weights)
// and the tokenizer above.
inline std::string write_text_model_dir(const std::filesystem::path& parent) {
  const auto dir = parent / "text-gpt2";
  torch::manual_seed(4);
  models::GPT2Config c{.vocab_size = kTextModelVocab, .n_positions = 64, .n_embd = 32, .n_layer = 2, .n_head = 2};
  auto m = std::make_shared<models::GPT2Impl>(c);
  widen_weights(*m, 0.4);
  models::save_pretrained(*m, dir.string());
  data::test::write_toy_tokenizer(dir);
  add_letter_merges(dir);
  return dir.string();
}

}  // namespace ds::inference::testing
