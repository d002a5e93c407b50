// A toy byte-level tokenizer folder for the fine-tuning data tests (tests/data, tests/models,
// tests/faults): byte b is id b, "<|endoftext|>" 256 (eos and pad), "<|im_start|>" 257,
// "<|im_end|>" 258, no merges, ChatML chat_template. Header-only; links ds_data.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/byte_level.h"

namespace ds::data::test {

inline constexpr const char* kChatMLTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

inline void write_toy_tokenizer(const std::filesystem::path& dir) {
  using Json = nlohmann::json;
  Json vocab = Json::object();
  const auto& alphabet = ByteLevelAlphabet::get();
  for (int b = 0; b < 256; ++b) vocab[alphabet.encoded(uint8_t(b))] = b;
  Json added = Json::array();
  int id = 256;
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    added.push_back({{"id", id++}, {"content", t}, {"special", true}, {"normalized", false}});
  const Json tok = {{"version", "1.0"},
                    {"added_tokens", added},
                    {"normalizer", nullptr},
                    {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                    {"post_processor", nullptr},
                    {"decoder", {{"type", "ByteLevel"}}},
                    {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array()}}}};
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  std::ofstream(dir / "tokenizer_config.json")
      << Json{{"eos_token", "<|endoftext|>"}, {"pad_token", "<|endoftext|>"}, {"chat_template", kChatMLTemplate}}.dump();
}

}  // namespace ds::data::test
