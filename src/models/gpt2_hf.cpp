#include "models/gpt2_hf.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <unordered_set>

#include "checkpoint/safetensors.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::models {
namespace fs = std::filesystem;
using checkpoint::SafetensorsFile;
using checkpoint::StDtype;

bool is_conv1d_weight(const std::string& name) {
  for (const char* s : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.ends_with(s)) return true;
  return false;
}

nlohmann::json hf_config_json(const GPT2Config& c) {
  return {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"activation_function", "gelu_new"},
          {"vocab_size", c.vocab_size}, {"n_positions", c.n_positions}, {"n_ctx", c.n_positions},
          {"n_embd", c.n_embd}, {"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_inner", nullptr},
          {"layer_norm_epsilon", 1e-5}, {"initializer_range", 0.02}, {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0}, {"tie_word_embeddings", true}, {"bos_token_id", 50256}, {"eos_token_id", 50256},
          {"torch_dtype", "float32"}};
}

GPT2Config config_from_hf_json(const nlohmann::json& j) {
  GPT2Config c;
  c.vocab_size = j.value("vocab_size", c.vocab_size);
  c.n_positions = j.value("n_positions", c.n_positions);
  c.n_embd = j.value("n_embd", c.n_embd);
  c.n_layer = j.value("n_layer", c.n_layer);
  c.n_head = j.value("n_head", c.n_head);
  return c;
}

namespace {

torch::ScalarType torch_dtype(StDtype d, const std::string& file, const std::string& name) {
  switch (d) {
    case StDtype::F32: return torch::kFloat32;
    case StDtype::F16: return torch::kFloat16;
    case StDtype::BF16: return torch::kBFloat16;
    case StDtype::F64: return torch::kFloat64;
    default:
      throw IoError(fmt::format("{}: {} is {}, not a float dtype a GPT-2 weight can have", file, name,
                                checkpoint::dtype_name(d)));
  }
}

// The files to read: one .safetensors, or the shards an index names.
std::vector<std::string> resolve_files(const std::string& path) {
  fs::path p(path);
  if (fs::is_directory(p)) {
    if (fs::exists(p / "model.safetensors.index.json")) p /= "model.safetensors.index.json";
    else if (fs::exists(p / "model.safetensors")) p /= "model.safetensors";
    else throw IoError(path + ": holds neither model.safetensors nor model.safetensors.index.json");
  }
  if (p.string().ends_with(".index.json")) {
    std::ifstream in(p);
    DS_CHECK(in.good(), IoError, p.string() + ": cannot open");
    auto j = nlohmann::json::parse(in, nullptr, false);
    DS_CHECK(!j.is_discarded() && j.contains("weight_map") && j["weight_map"].is_object(), IoError,
             p.string() + ": not a safetensors index (expected {\"weight_map\": {tensor: file}})");
    std::vector<std::string> files;
    for (const auto& [name, file] : j["weight_map"].items()) {
      DS_CHECK(file.is_string(), IoError, p.string() + ": weight_map[" + name + "] is not a file name");
      const std::string f = (p.parent_path() / file.get<std::string>()).string();
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
    }
    return files;
  }
  return {p.string()};
}

}  // namespace

void load_hf_gpt2(GPT2Impl& model, const std::string& path) {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, std::pair<const SafetensorsFile*, const checkpoint::TensorInfo*>> where;
  for (const auto& f : resolve_files(path)) {
    files.push_back(std::make_unique<SafetensorsFile>(f));
    for (const auto& t : files.back()->tensors()) where[t.name] = {files.back().get(), &t};
  }
  std::unordered_set<std::string> used;
  std::unordered_set<const void*> seen;
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;  // tied: loaded once
    const std::string& ours = item.key();
    std::string name = ours;
    if (!where.count(name) && ours.starts_with("transformer.")) name = ours.substr(12);  // GPT2Model files
    auto it = where.find(name);
    DS_CHECK(it != where.end(), IoError,
             fmt::format("{}: no tensor {} (or {}) for the model's parameter (is it a GPT-2 checkpoint of this shape?)",
                         path, ours, ours.substr(ours.starts_with("transformer.") ? 12 : 0)));
    const auto& [file, info] = it->second;
    used.insert(name);
    torch::Tensor t = torch::empty(info->shape, torch_dtype(info->dtype, file->path(), name));
    file->read(*info, t.data_ptr(), info->nbytes());
    if (is_conv1d_weight(ours)) t = t.t();
    DS_CHECK(t.sizes() == item.value().sizes(), IoError,
             fmt::format("{}: {} has shape {} (as Linear) but the model's parameter is {}", file->path(), name,
                         t.sizes().vec(), item.value().sizes().vec()));
    item.value().copy_(t);
  }
  std::vector<std::string> unknown;
  for (const auto& [name, loc] : where) {
    if (used.count(name) || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") || name == "lm_head.weight")
      continue;
    unknown.push_back(name);
  }
  if (!unknown.empty())
    log::warn("load_hf_gpt2 {}: {} tensors the model does not have were ignored (first: {})", path, unknown.size(),
              unknown.front());
}

}  // namespace ds::models
