// GPT-2 in Hugging Face's layout: our module names already follow GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight"), but HF's attention and MLP projections are Conv1D, whose
// weight is [in, out] — the transpose of our Linear's [out, in]. This file owns that mapping both
// ways: config.json for an export, and loading an HF model.safetensors (single or sharded with
// model.safetensors.index.json) into our GPT-2 for fine-tuning.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "models/gpt2.h"
#include "models/gpt2_config.h"

namespace ds::models {

// attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj weights: stored transposed in HF files.
bool is_conv1d_weight(const std::string& name);

// HF's config.json for this shape (GPT2LMHeadModel, gelu_new, tied embeddings).
nlohmann::json hf_config_json(const GPT2Config& c);
// The shape an HF config.json describes (n_embd, n_layer, n_head, n_positions, vocab_size).
GPT2Config config_from_hf_json(const nlohmann::json& j);

// Loads every parameter of `model` from `path`: a .safetensors file, a model.safetensors.index.json,
// or a directory holding either. Accepts GPT2LMHeadModel names ("transformer.…") and GPT2Model
// names (no prefix); ignores the attention-mask buffers and the tied lm_head.weight. Converts the
// file's float dtype to the parameter's. ds::IoError naming the file and tensor when one is
// missing or has the wrong shape.
void load_hf_gpt2(GPT2Impl& model, const std::string& path);

}  // namespace ds::models
