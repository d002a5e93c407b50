// Hugging Face model folders: from_pretrained reads config.json, builds the family its model_type
// names (gpt2, llama, mistral, qwen2, opt) and loads its safetensors (one file or shards with an
// index, any float dtype); save_pretrained writes config.json + model.safetensors that
// transformers' AutoModelForCausalLM.from_pretrained reads.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "models/causal_lm.h"

namespace ds::models {

struct PretrainedOptions {
  // The parameters' dtype after loading (file tensors are converted; fp32 is what training wants:
  // the engine makes its own 16-bit copies).
  torch::ScalarType dtype = torch::kFloat32;
  // Only these layers built and read (a pipeline stage's: nn/placeholder.h); the others' tensors are
  // placeholders, checked against the files' shapes but not read.
  nn::LayerSelection selection{};
};

struct SaveOptions {
  std::optional<torch::ScalarType> dtype;  // convert on write; default: the parameters' own
  int64_t max_shard_bytes = 0;             // > 0: shards of at most this + an index (HF's max_shard_size)
};

// The model_types from_config / from_pretrained build.
std::vector<std::string> supported_model_types();

// `dir`/config.json parsed; ds::IoError naming the file when missing or not JSON.
nlohmann::json read_hf_config(const std::string& dir);

// A randomly initialised model (HF's init, torch's global generator) of the family `config`'s
// model_type names. ds::NotSupported naming an unknown or missing model_type and the supported
// ones; ds::ConfigError naming a missing or bad field. `source` names the file in messages.
std::shared_ptr<CausalLM> from_config(const nlohmann::json& config, const std::string& source = "config.json",
                                      bool init_weights = true, const nn::LayerSelection& selection = {});

// from_config(read_hf_config(dir)) with the weights of `dir` loaded (see load_pretrained_weights).
std::shared_ptr<CausalLM> from_pretrained(const std::string& dir, const PretrainedOptions& options = {});

// Loads every parameter of `model` from `path` (a folder, a .safetensors file or an index), by HF
// name, with or without the base-model prefix ("model." / "transformer."), converting dtypes and
// undoing HF-side transposes (a placeholder parameter: only its name and shape checked). ds::IoError naming the tensor and the file when one is missing or has
// the wrong shape (both shapes named). Tensors the model does not use are ignored with one warning
// (tied lm_head.weight and rotary inv_freq buffers silently).
void load_pretrained_weights(CausalLM& model, const std::string& path);

// Writes `dir`/config.json (model.hf_config() with torch_dtype) and the weights in HF's layout
// (tied weights once, as transformers saves them). The folder is created if needed.
void save_pretrained(const CausalLM& model, const std::string& dir, const SaveOptions& options = {});

}  // namespace ds::models
