// Small constructors the Hugging Face families share (Llama, OPT): one definition, so the families
// cannot drift apart and a unity build sees each name once.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>

#include "models/lora_linear.h"

namespace ds::models::hf {

// A plain Linear (the LM head, OPT's project_in/out): not LoRA-capable, not cut by AutoTP.
inline torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// A projection: LoRA-capable, and a TpLinear AutoTP can cut.
inline LoraLinear proj(int64_t in, int64_t out, bool bias) { return LoraLinear(in, out, bias); }

// HF's padding_idx: a negative pad_token_id counts from the end, as torch.nn.Embedding does.
inline std::optional<int64_t> padding_row(const std::optional<int64_t>& pad, int64_t vocab) {
  if (!pad) return std::nullopt;
  return *pad < 0 ? *pad + vocab : *pad;
}

}  // namespace ds::models::hf
