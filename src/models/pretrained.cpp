#include "models/pretrained.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <unordered_set>

#include "models/gpt2.h"
#include "models/gpt2_hf.h"
#include "models/hf_weights.h"
#include "models/llama.h"
#include "models/opt.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::models {
namespace fs = std::filesystem;

namespace {

std::string torch_dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return "float32";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat64: return "float64";
    default: return c10::toString(t);
  }
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::vector<std::string> supported_model_types() { return {"gpt2", "llama", "mistral", "qwen2", "opt"}; }

nlohmann::json read_hf_config(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  DS_CHECK(fs::is_directory(dir), IoError, dir + ": not a directory (expected a Hugging Face model folder)");
  std::ifstream in(path);
  DS_CHECK(in.good(), IoError, path.string() + ": cannot open (a Hugging Face model folder has a config.json)");
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  DS_CHECK(!j.is_discarded(), IoError, path.string() + ": not valid JSON");
  DS_CHECK(j.is_object(), IoError, path.string() + ": must hold a JSON object");
  return j;
}

std::shared_ptr<CausalLM> from_config(const nlohmann::json& config, const std::string& source, bool init_weights,
                                      const nn::LayerSelection& selection) {
  if (!config.is_object()) throw ConfigError("", source + ": must be a JSON object");
  DS_CHECK(config.contains("model_type") && config["model_type"].is_string(), NotSupported,
           source + ": no \"model_type\" (supported: " + joined(supported_model_types()) + ")");
  const std::string type = config["model_type"].get<std::string>();
  if (type == "gpt2") {
    GPT2Config c = config_from_hf_json(config);
    return std::make_shared<GPT2Impl>(c, selection);
  }
  if (type == "llama" || type == "mistral" || type == "qwen2")
    return std::make_shared<LlamaImpl>(LlamaConfig::from_hf_json(config, source), init_weights, selection);
  if (type == "opt") return std::make_shared<OPTImpl>(OPTConfig::from_hf_json(config, source), init_weights, selection);
  throw NotSupported(source + ": model_type \"" + type + "\" is not supported (supported: " +
                     joined(supported_model_types()) + ")");
}

std::shared_ptr<CausalLM> from_pretrained(const std::string& dir, const PretrainedOptions& options) {
  const auto config = read_hf_config(dir);
  auto model = from_config(config, (fs::path(dir) / "config.json").string(), /*init_weights=*/false, options.selection);
  if (options.dtype != torch::kFloat32) {
    if (options.selection.all()) model->to(options.dtype);
    else nn::to_dtype(*model, options.dtype);  // Module::to would fill the placeholders in
  }
  load_pretrained_weights(*model, dir);
  return model;
}

void load_pretrained_weights(CausalLM& model, const std::string& path) {
  const HfWeights files(path);
  const std::string prefix = model.hf_base_prefix();
  std::unordered_set<std::string> used;
  std::unordered_set<const void*> seen;
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;  // shared: loaded once
    const std::string& ours = item.key();
    std::string name = ours;
    if (!files.contains(name) && ours.starts_with(prefix) && files.contains(ours.substr(prefix.size())))
      name = ours.substr(prefix.size());  // a base-model checkpoint
    DS_CHECK(files.contains(name), IoError,
             fmt::format("{}: no tensor {} (the {} model's parameter; does config.json describe this checkpoint?)",
                         files.source(), ours, model.model_type()));
    used.insert(name);
    torch::Tensor& p = item.value();
    const auto& info = files.info(name);
    const bool transposed = model.hf_transposed(ours);
    std::vector<int64_t> expect = p.sizes().vec();
    if (transposed && expect.size() == 2) std::swap(expect[0], expect[1]);
    DS_CHECK(info.shape == expect, IoError,
             fmt::format("{}: tensor {} has shape {} but the {} model's parameter {} needs {}{} (config.json and the "
                         "weights disagree)",
                         files.file_of(name), name, shape_str(info.shape), model.model_type(), ours,
                         shape_str(expect), transposed ? " (HF Conv1D layout)" : ""));
    if (nn::is_placeholder(p)) continue;  // another pipeline stage's: not read here
    auto t = files.read(name, p.scalar_type());
    p.copy_(transposed ? t.t() : t);
  }
  std::vector<std::string> unknown;
  for (const auto& name : files.names())
    if (!used.count(name) && !model.hf_ignorable(name)) unknown.push_back(name);
  if (!unknown.empty())
    log::warn("{}: {} tensors the {} model does not have were ignored (first: {})", files.source(), unknown.size(),
              model.model_type(), unknown.front());
}

void save_pretrained(const CausalLM& model, const std::string& dir, const SaveOptions& options) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::unordered_set<const void*> seen;
  torch::ScalarType dtype = torch::kFloat32;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    torch::Tensor t = item.value().detach();
    dtype = options.dtype.value_or(t.scalar_type());
    if (t.scalar_type() != dtype) t = t.to(dtype);
    if (model.hf_transposed(item.key())) t = t.t();
    tensors.emplace_back(item.key(), t);
  }
  fs::create_directories(dir);
  write_hf_weights(dir, tensors, options.max_shard_bytes);
  auto config = model.hf_config();
  config["torch_dtype"] = torch_dtype_name(dtype);
  write_text_atomically((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace ds::models
