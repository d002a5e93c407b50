// LoRA on any built-in model (PEFT's LoraConfig / get_peft_model / merge_and_unload /
// save_pretrained / PeftModel.from_pretrained, for the families in src/models).
//
// apply_lora(model, cfg) attaches an adapter to every LoraLinear whose module name matches
// cfg.target_modules, freezes everything else (requires_grad false: the engine gives it no
// gradient, master copy or optimizer state), casts the frozen base to cfg.base_dtype (bf16 by
// default) and adds each adapter's names to the LayerList layer that uses its base weight, so ZeRO
// stage 3 partitions and gathers the adapters with their layer. Call it before ds::initialize.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "models/causal_lm.h"
#include "models/lora_linear.h"

namespace ds::models {

struct LoraConfig {
  int64_t r = 8;
  double lora_alpha = 8.0;
  double lora_dropout = 0.0;
  // PEFT's matching: each entry matches a module whose name equals it or ends with "." + it
  // ("q_proj" matches "model.decoder.layers.0.self_attn.q_proj"); ["all-linear"] takes every
  // LoraLinear. When target_regex is set instead, a module matches if its whole name matches it
  // (PEFT's target_modules given as one string).
  std::vector<std::string> target_modules = {"q_proj", "v_proj"};
  std::optional<std::string> target_regex;
  // dtype of the frozen base's floating parameters; nullopt keeps them as they are.
  std::optional<torch::ScalarType> base_dtype = torch::kBFloat16;
  std::string base_model_name_or_path;  // recorded in adapter_config.json

  // adapter_config.json as PEFT writes it (peft_type LORA, task_type CAUSAL_LM, every field).
  nlohmann::json to_peft_json(const std::string& model_type) const;
  // Reads PEFT's adapter_config.json: ConfigError naming the field for a non-LoRA peft_type,
  // use_dora / use_rslora / bias other than "none" (not supported), a missing r.
  static LoraConfig from_peft_json(const nlohmann::json& j, const std::string& source);
};

// Adapts `model` in place; returns the adapted modules' names (model order). ConfigError
// ("target_modules") naming the patterns when nothing matches, or a pattern that matched nothing;
// Error when the model's LayerList already has hooks (apply before ds::initialize).
std::vector<std::string> apply_lora(CausalLM& model, const LoraConfig& cfg);

// The adapter parameters: (our name, tensor) in model order; PEFT's key is "base_model.model." + name.
std::vector<std::pair<std::string, torch::Tensor>> lora_parameters(torch::nn::Module& model);
std::string peft_key(const std::string& name);  // "base_model.model." + name

// W += (alpha/r)·B·A for every adapted Linear, then the adapters are gone (PEFT's
// merge_and_unload); their names leave the LayerList. Returns how many were merged.
int64_t merge_lora(CausalLM& model);

// Writes <dir>/adapter_model.safetensors (PEFT's keys, fp32, {"format":"pt"}) and
// <dir>/adapter_config.json. Tensors must be whole (gather them first under ZeRO-3).
void save_lora_adapter(CausalLM& model, const LoraConfig& cfg, const std::string& dir);

// Reads <dir>/adapter_config.json, applies LoRA with it (base_dtype as given) and loads the adapter
// weights. IoError naming the file and key for a missing tensor, a wrong shape or an extra key.
LoraConfig load_lora_adapter(CausalLM& model, const std::string& dir,
                             std::optional<torch::ScalarType> base_dtype = torch::kBFloat16);

}  // namespace ds::models
