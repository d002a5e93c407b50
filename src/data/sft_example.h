// A fine-tuning record tokenized for training: input ids and labels of the same length, Hugging
// Face's convention (labels[t] = ids[t] where the loss counts, -100 elsewhere; the model shifts).
// Prompts, system and user turns and chat headers are -100, so the loss is on responses only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/sft_record.h"
#include "data/tokenizer.h"

namespace ds::data {

inline constexpr int32_t kIgnoreLabel = -100;

struct SftExample {
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;  // same length; kIgnoreLabel where no loss is taken
};

// text: the tokenizer's special tokens (BOS ...) around the text, every token trained.
// prompt/completion: prompt and completion tokenized separately (as TRL does), wrapped in the
//   special tokens as one sequence; labels only on the completion.
// messages: rendered by `chat` (the tokenizer's chat_template); each assistant turn's span is what
//   render(turns up to it) adds to render(turns before it, add_generation_prompt) — its content and
//   end-of-turn token; everything else is -100.
// EOS: the tokenizer's eos token is appended (and trained) unless the sequence already ends with it
//   (or, for chat, the last assistant turn already carries it, as Llama-3's and Qwen2's templates do).
// `chat` may be null when the record is not chat; `where` names the line in errors.
SftExample tokenize_sft_record(const SftRecord& record, const Tokenizer& tok, const ChatTemplate* chat,
                               const std::string& where);

}  // namespace ds::data
