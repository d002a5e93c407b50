// ds::inference::Pipeline: the C++ API for generation. Load a model (a Hugging Face folder, or a
// CausalLM you built), then generate for a batch of prompts: every prompt becomes a request of one
// InferenceEngine, which runs them together with continuous batching; results come back in prompt
// order. Token ids in, token ids out (a tokenizer sits in front: bytes for the built-in tiny models).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "inference/engine.h"
#include "models/causal_lm.h"

namespace ds::inference {

struct Completion {
  std::vector<int64_t> tokens;          // the output (no prompt, no stop token or stop sequence)
  std::vector<TokenLogprob> logprobs;   // one per output token with params.logprobs
  FinishReason finish = FinishReason::kNone;
  int64_t prompt_tokens = 0;
};

// The ids in config.json's eos_token_id (an id, a list, or null), dropping any outside the vocabulary.
std::vector<int64_t> eos_token_ids(const nlohmann::json& hf_config, int64_t vocab_size);

class Pipeline {
 public:
  // options.eos_token_ids empty: taken from model->hf_config().
  explicit Pipeline(std::shared_ptr<models::CausalLM> model, EngineOptions options = {});
  // models::from_pretrained(dir) with parameters in `dtype` (fp32 or bf16 on CPU).
  static Pipeline from_pretrained(const std::string& dir, EngineOptions options = {},
                                  torch::ScalarType dtype = torch::kFloat32);

  // With options.tensor_parallel every rank of the group calls generate (rank 0's prompts and
  // parameters count; the others' are ignored) and gets the same completions; an error on rank 0 is
  // thrown on every rank.
  std::vector<Completion> generate(const std::vector<std::vector<int64_t>>& prompts, const SamplingParams& params);
  // One SamplingParams per prompt.
  std::vector<Completion> generate(const std::vector<std::vector<int64_t>>& prompts,
                                   const std::vector<SamplingParams>& params);

  InferenceEngine& engine() { return *engine_; }

 private:
  std::vector<Completion> run(const std::vector<std::vector<int64_t>>& prompts, const std::vector<SamplingParams>& params);

  std::unique_ptr<InferenceEngine> engine_;
};

}  // namespace ds::inference
