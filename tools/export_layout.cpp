#include "export_layout.h"

#include "models/gpt2_hf.h"

namespace ds::tools {

namespace {
constexpr const char* kCopyIt = " into the output folder to load it with from_pretrained or transformers";
}  // namespace

ExportLayout export_layout(const nlohmann::json& model, const std::string& torch_dtype) {
  ExportLayout out;
  if (model.is_object()) out.model_type = model.value("type", "");
  if (out.model_type.empty()) {
    out.missing_config = std::string("the checkpoint does not record its model (no client_state \"model\" entry with a "
                                     "type: it was not saved by ds-train); copy the model's config.json") + kCopyIt;
    return out;
  }
  if (model.contains("config") && model["config"].is_object()) {  // ds-train --model-dir: the folder's config.json
    out.config = model["config"];
    out.model_type = out.config->value("model_type", out.model_type);
  } else if (out.model_type == "gpt2" && model.contains("n_embd")) {  // ds-train's built-in GPT-2: its shape
    models::GPT2Config c;
    c.vocab_size = model.at("vocab_size");
    c.n_positions = model.at("n_positions");
    c.n_embd = model.at("n_embd");
    c.n_layer = model.at("n_layer");
    c.n_head = model.at("n_head");
    out.config = models::hf_config_json(c);
  } else {
    const std::string dir = model.value("dir", "");
    out.missing_config = "the checkpoint records model_type \"" + out.model_type +
                         "\" but not its config.json (saved by an older ds-train); copy " +
                         (dir.empty() ? std::string("the model's config.json") : dir + "/config.json") +
                         kCopyIt;
  }
  out.transpose_conv1d = out.model_type == "gpt2";
  if (out.config) (*out.config)["torch_dtype"] = torch_dtype;
  return out;
}

}  // namespace ds::tools
