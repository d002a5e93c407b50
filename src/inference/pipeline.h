// ds::inference::Pipeline: the C++ API for generation. Load a model (a Hugging Face folder, or a
// CausalLM you built), then generate for a batch of prompts: every prompt becomes a request of one
// InferenceEngine, which runs them together with continuous batching; results come back in prompt
// order. generate() takes and returns token ids; generate_text() takes and returns text through the
// pipeline's TextCodec (the model folder's tokenizer, or bytes as tokens), with stop strings matched
// on the decoded text: a request ends (is aborted in the engine) at the token that completes one.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/text_codec.h"
#include "inference/engine.h"
#include "models/causal_lm.h"

namespace ds::inference {

struct Completion {
  std::vector<int64_t> tokens;          // the output (no prompt, no stop token or stop sequence)
  std::vector<TokenLogprob> logprobs;   // one per output token with params.logprobs
  FinishReason finish = FinishReason::kNone;
  int64_t prompt_tokens = 0;
};

struct TextCompletion {
  std::string text;                     // the output's text, cut just before a stop string
  // The output tokens through the one that completed the stop string (a stop string may end inside
  // a token, so the text, not the tokens, is what is cut); no stop token.
  std::vector<int64_t> tokens;
  std::vector<TokenLogprob> logprobs;   // one per token with params.logprobs
  FinishReason finish = FinishReason::kNone;  // kStop: a stop string, stop token or eos
  int64_t prompt_tokens = 0;
};

// The ids in config.json's eos_token_id (an id, a list, or null), dropping any outside the vocabulary.
std::vector<int64_t> eos_token_ids(const nlohmann::json& hf_config, int64_t vocab_size);

class Pipeline {
 public:
  // options.eos_token_ids empty: taken from model->hf_config(). `codec`: how generate_text turns
  // text into ids and back (bytes as tokens unless given).
  explicit Pipeline(std::shared_ptr<models::CausalLM> model, EngineOptions options = {},
                    data::TextCodec codec = data::TextCodec::bytes());
  // models::from_pretrained(dir) with parameters in `dtype` (fp32 or bf16 on CPU); the folder's
  // tokenizer (tokenizer.json / tokenizer.model) for generate_text, bytes as tokens without one.
  static Pipeline from_pretrained(const std::string& dir, EngineOptions options = {},
                                  torch::ScalarType dtype = torch::kFloat32);

  // With options.tensor_parallel every rank of the group calls generate / generate_text (rank 0's
  // prompts and parameters count; the others' are ignored) and gets the same results; an error on
  // rank 0 is thrown on every rank.
  std::vector<Completion> generate(const std::vector<std::vector<int64_t>>& prompts, const SamplingParams& params);
  // One SamplingParams per prompt.
  std::vector<Completion> generate(const std::vector<std::vector<int64_t>>& prompts,
                                   const std::vector<SamplingParams>& params);

  // Text in, text out: each prompt encoded with its special tokens (a Llama tokenizer's BOS), each
  // output decoded and cut at the first of `stop` (at most as many strings as you like; "" ignored).
  std::vector<TextCompletion> generate_text(const std::vector<std::string>& prompts, const SamplingParams& params,
                                            const std::vector<std::string>& stop = {});
  std::vector<TextCompletion> generate_text(const std::vector<std::string>& prompts,
                                            const std::vector<SamplingParams>& params,
                                            const std::vector<std::string>& stop = {});

  InferenceEngine& engine() { return *engine_; }
  const data::TextCodec& codec() const { return codec_; }

 private:
  // Without tensor parallelism `lead()` itself. With it, rank 0 runs `lead` while the other ranks
  // follow its forwards, and rank 0's result (or error) is what every rank gets.
  nlohmann::json on_every_rank(const std::function<nlohmann::json()>& lead);
  std::vector<TextCompletion> generate_text_here(const std::vector<std::string>& prompts,
                                                 const std::vector<SamplingParams>& params,
                                                 const std::vector<std::string>& stop);
  // Adds one request per prompt and steps the engine until every one has reported finished, handing
  // each output to `on_output` with its prompt's index.
  void run(const std::vector<std::vector<int64_t>>& prompts, const std::vector<SamplingParams>& params,
           const std::function<void(size_t, const RequestOutput&)>& on_output);

  std::unique_ptr<InferenceEngine> engine_;
  data::TextCodec codec_;
};

}  // namespace ds::inference
