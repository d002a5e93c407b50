// LoRA: matching, freezing, LayerList bookkeeping, merge, and PEFT's adapter files.
#include "models/lora.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "format/safetensors.h"
#include "models/hf_weights.h"
#include "nn/placeholder.h"
#include "util/error.h"

namespace ds::models {
namespace {

const char* const kPeftPrefix = "base_model.model.";
const char* const kAdapterFile = "adapter_model.safetensors";
const char* const kConfigFile = "adapter_config.json";

bool is_adapter_name(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

// PEFT's check_target_module_exists: exact name, or a suffix after a dot; a regex must match whole.
bool matches(const LoraConfig& cfg, const std::string& name, std::set<std::string>& used) {
  if (cfg.target_regex) return std::regex_match(name, std::regex(*cfg.target_regex));
  for (const auto& t : cfg.target_modules) {
    if (t == "all-linear" || name == t || (name.size() > t.size() && name.ends_with("." + t))) {
      used.insert(t);
      return true;
    }
  }
  return false;
}

std::vector<std::pair<std::string, std::shared_ptr<LoraLinearImpl>>> lora_linears(torch::nn::Module& model) {
  std::vector<std::pair<std::string, std::shared_ptr<LoraLinearImpl>>> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto l = std::dynamic_pointer_cast<LoraLinearImpl>(item.value())) out.emplace_back(item.key(), l);
  return out;
}

// Rebuilds the LayerList with `names_of(param)` in place of each param name (ZeRO-3 gathers a
// layer's listed parameters; an adapter must be listed where its base weight is).
template <class F>
void relist(ds::nn::LayerList& layers, F names_of) {
  DS_CHECK(layers.hooks() == nullptr && layers.runner() == nullptr, Error,
           "LoRA must be applied (or merged) before ds::initialize: the model's layers already run under the engine");
  ds::nn::LayerList rebuilt;
  for (const auto& layer : layers) {
    ds::nn::Layer copy = layer;
    copy.param_names.clear();
    for (const auto& n : layer.param_names)
      for (auto& m : names_of(n)) copy.param_names.push_back(std::move(m));
    rebuilt.add(std::move(copy));
  }
  layers = std::move(rebuilt);
}

}  // namespace

std::string peft_key(const std::string& name) { return kPeftPrefix + name; }

nlohmann::json LoraConfig::to_peft_json(const std::string& model_type) const {
  nlohmann::json targets = target_regex ? nlohmann::json(*target_regex) : nlohmann::json(target_modules);
  return {{"alpha_pattern", nlohmann::json::object()},
          {"auto_mapping", nullptr},
          {"base_model_name_or_path", base_model_name_or_path.empty() ? nlohmann::json(nullptr)
                                                                      : nlohmann::json(base_model_name_or_path)},
          {"bias", "none"},
          {"fan_in_fan_out", model_type == "gpt2"},  // HF GPT-2's Conv1D stores [in, out]
          {"inference_mode", true},
          {"init_lora_weights", true},
          {"layer_replication", nullptr},
          {"layers_pattern", nullptr},
          {"layers_to_transform", nullptr},
          {"loftq_config", nlohmann::json::object()},
          {"lora_alpha", lora_alpha},
          {"lora_dropout", lora_dropout},
          {"megatron_config", nullptr},
          {"megatron_core", "megatron.core"},
          {"modules_to_save", nullptr},
          {"peft_type", "LORA"},
          {"r", r},
          {"rank_pattern", nlohmann::json::object()},
          {"revision", nullptr},
          {"target_modules", targets},
          {"task_type", "CAUSAL_LM"},
          {"use_dora", false},
          {"use_rslora", false}};
}

LoraConfig LoraConfig::from_peft_json(const nlohmann::json& j, const std::string& source) {
  auto bad = [&](const std::string& key, const std::string& what) { return ConfigError(source + ": " + key, what); };
  if (!j.is_object()) throw bad("(file)", "adapter_config.json must be a JSON object");
  if (j.value("peft_type", std::string("LORA")) != "LORA")
    throw bad("peft_type", fmt::format("'{}' is not LoRA; only LORA adapters can be loaded", j["peft_type"].dump()));
  if (j.value("use_dora", false)) throw bad("use_dora", "DoRA adapters are not supported; retrain with use_dora=false");
  if (j.value("use_rslora", false)) throw bad("use_rslora", "rank-stabilised LoRA is not supported");
  if (j.contains("bias") && j["bias"] != "none") throw bad("bias", "only bias=\"none\" adapters are supported");
  for (const char* k : {"rank_pattern", "alpha_pattern"})
    if (j.contains(k) && j[k].is_object() && !j[k].empty()) throw bad(k, "per-module ranks/alphas are not supported");
  if (!j.contains("r") || !j["r"].is_number_integer()) throw bad("r", "missing or not an integer");
  LoraConfig c;
  c.r = j["r"].get<int64_t>();
  c.lora_alpha = j.contains("lora_alpha") ? j["lora_alpha"].get<double>() : 8.0;
  c.lora_dropout = j.contains("lora_dropout") && j["lora_dropout"].is_number() ? j["lora_dropout"].get<double>() : 0.0;
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
    c.base_model_name_or_path = j["base_model_name_or_path"];
  const auto& t = j.contains("target_modules") ? j["target_modules"] : nlohmann::json();
  if (t.is_string()) {
    c.target_regex = t.get<std::string>();
    c.target_modules.clear();
  } else if (t.is_array() && !t.empty()) {
    c.target_modules = t.get<std::vector<std::string>>();
  } else {
    throw bad("target_modules", "missing: a list of module names or a regular expression");
  }
  return c;
}

std::vector<std::string> apply_lora(CausalLM& model, const LoraConfig& cfg) {
  if (cfg.r < 1) throw ConfigError("r", fmt::format("LoRA rank must be >= 1, got {}", cfg.r));
  if (!(cfg.lora_dropout >= 0.0 && cfg.lora_dropout < 1.0))
    throw ConfigError("lora_dropout", fmt::format("must be in [0, 1), got {}", cfg.lora_dropout));
  if (!cfg.target_regex && cfg.target_modules.empty())
    throw ConfigError("target_modules", "empty: name the modules to adapt (e.g. [\"q_proj\", \"v_proj\"])");
  auto linears = lora_linears(model);
  std::vector<std::string> adapted;
  std::set<std::string> used;
  std::vector<std::string> candidates;
  for (auto& [name, linear] : linears) {
    candidates.push_back(name);
    if (!matches(cfg, name, used)) continue;
    linear->add_adapter(cfg.r, cfg.lora_alpha, cfg.lora_dropout);
    adapted.push_back(name);
  }
  const std::string targets = cfg.target_regex ? *cfg.target_regex : fmt::format("{}", fmt::join(cfg.target_modules, ", "));
  auto example = [&] { return candidates.empty() ? std::string("none") : candidates.front(); };
  if (adapted.empty())
    throw ConfigError("target_modules", fmt::format("[{}] matched no Linear of this {} model (its Linear modules are "
                                                    "named like '{}'; PEFT spells them q_proj, v_proj, c_attn, fc1, ...)",
                                                    targets, model.model_type(), example()));
  if (!cfg.target_regex)
    for (const auto& t : cfg.target_modules)
      if (!used.count(t))
        throw ConfigError("target_modules", fmt::format("'{}' matched no Linear of this {} model (e.g. '{}')", t,
                                                        model.model_type(), example()));

  // Freeze the base (and keep it in 16 bits); only the adapters train.
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    auto& p = item.value();
    const bool adapter = is_adapter_name(item.key());
    p.requires_grad_(adapter);
    if (!adapter && cfg.base_dtype && p.is_floating_point() && p.scalar_type() != *cfg.base_dtype)
      p.set_data(nn::is_placeholder(p) ? nn::placeholder(p.sizes(), p.options().dtype(*cfg.base_dtype))  // not held here
                                       : p.data().to(*cfg.base_dtype));
  }

  std::map<std::string, std::vector<std::string>> adapter_of;  // base weight → its adapter names
  for (const auto& name : adapted)
    adapter_of[name + ".weight"] = {name + ".lora_A.weight", name + ".lora_B.weight"};
  relist(model.layers(), [&](const std::string& n) {
    std::vector<std::string> names{n};
    if (auto it = adapter_of.find(n); it != adapter_of.end()) names.insert(names.end(), it->second.begin(), it->second.end());
    return names;
  });
  return adapted;
}

std::vector<std::pair<std::string, torch::Tensor>> lora_parameters(torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model.named_parameters(/*recurse=*/true))
    if (is_adapter_name(item.key())) out.emplace_back(item.key(), item.value());
  return out;
}

int64_t merge_lora(CausalLM& model) {
  relist(model.layers(), [](const std::string& n) {
    return is_adapter_name(n) ? std::vector<std::string>{} : std::vector<std::string>{n};
  });
  int64_t merged = 0;
  for (auto& [name, linear] : lora_linears(model)) {
    if (!linear->has_adapter()) continue;
    linear->merge_adapter();
    ++merged;
  }
  return merged;
}

void save_lora_adapter(CausalLM& model, const LoraConfig& cfg, const std::string& dir) {
  namespace fs = std::filesystem;
  auto params = lora_parameters(model);
  DS_CHECK(!params.empty(), Error, "save_lora_adapter: the model has no LoRA adapters (call apply_lora first)");
  fs::create_directories(dir);
  std::vector<torch::Tensor> keep;  // contiguous fp32 CPU copies, alive until commit()
  format::SafetensorsWriter w((fs::path(dir) / kAdapterFile).string());
  w.set_metadata("format", "pt");
  for (const auto& [name, t] : params) {
    DS_CHECK(t.numel() > 0, Error,
             fmt::format("save_lora_adapter: '{}' is empty here (under ZeRO-3, gather the parameters before saving)", name));
    keep.push_back(t.detach().to(torch::kCPU, torch::kFloat32).contiguous());
    w.add(peft_key(name), format::StDtype::F32, keep.back().sizes().vec(), keep.back().data_ptr());
  }
  w.commit();
  write_text_atomically((fs::path(dir) / kConfigFile).string(), cfg.to_peft_json(model.model_type()).dump(2) + "\n");
}

LoraConfig load_lora_adapter(CausalLM& model, const std::string& dir, std::optional<torch::ScalarType> base_dtype) {
  namespace fs = std::filesystem;
  const std::string cfg_path = (fs::path(dir) / kConfigFile).string();
  std::ifstream in(cfg_path);
  DS_CHECK(in.good(), IoError, fmt::format("{}: cannot open (a PEFT adapter folder holds adapter_config.json and {})",
                                           cfg_path, kAdapterFile));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(fmt::format("{}: not valid JSON: {}", cfg_path, e.what()));
  }
  LoraConfig cfg = LoraConfig::from_peft_json(j, cfg_path);
  cfg.base_dtype = base_dtype;
  const std::string file = (fs::path(dir) / kAdapterFile).string();
  HfWeights weights(file);
  apply_lora(model, cfg);
  std::set<std::string> expected;
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : lora_parameters(model)) {
    const std::string key = peft_key(name);
    expected.insert(key);
    DS_CHECK(weights.contains(key), IoError, fmt::format("{}: missing '{}' (adapter_config.json targets it)", file, key));
    auto v = weights.read(key, t.scalar_type());
    DS_CHECK(v.sizes() == t.sizes(), IoError,
             fmt::format("{}: '{}' has shape {} but the model's is {} (r or the base model differ)", file, key,
                         shape_str(v.sizes()), shape_str(t.sizes())));
    t.copy_(v);
  }
  for (const auto& key : weights.names())
    DS_CHECK(expected.count(key), IoError,
             fmt::format("{}: '{}' is not an adapter of this {} model under adapter_config.json's target_modules", file,
                         key, model.model_type()));
  return cfg;
}

}  // namespace ds::models
