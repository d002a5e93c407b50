// ds-zero-to-fp32's Hugging Face layout: from the checkpoint's client_state "model" entry, which
// config.json to write and whether GPT-2's Conv1D weights are transposed. ds-train records the
// model's whole config.json there ({"type", "config"}); older GPT-2 runs recorded only the shape
// ({"type": "gpt2", "vocab_size", ...}); a checkpoint of any other program may record nothing.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace ds::tools {

struct ExportLayout {
  std::string model_type;              // "" when the checkpoint does not say
  bool transpose_conv1d = false;       // GPT-2: attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj weights
  std::optional<nlohmann::json> config;  // config.json to write (torch_dtype set), or none
  std::string missing_config;          // why there is no config.json and what to do (when none)
};

// `model`: client_state["model"] (null or absent when the checkpoint has none); `torch_dtype`:
// "float32" | "bfloat16" | "float16", written into the config.
ExportLayout export_layout(const nlohmann::json& model, const std::string& torch_dtype);

}  // namespace ds::tools
