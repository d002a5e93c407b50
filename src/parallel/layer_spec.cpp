#include "parallel/layer_spec.h"

#include <fmt/format.h>

#include <map>

#include "util/error.h"

namespace ds::parallel {
namespace {

constexpr const char* kTiedModules = "tied_modules";  // DeepSpeed's PipelineModule.tied_modules

std::shared_ptr<torch::nn::Module> build_one(const LayerSpec& spec, int index, const LayerSeeds& seeds) {
  if (seeds.seed_layers) torch::manual_seed(uint64_t(seeds.base_seed + index));
  auto module = spec.build();
  DS_CHECK(module != nullptr, Error, "pipeline.layers: layer \"" + spec.name + "\"'s build returned no module");
  return module;
}

}  // namespace

void check_layer_specs(const std::vector<LayerSpec>& specs) {
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    const LayerSpec& s = specs[i];
    auto bad = [&](const std::string& why) {
      return ConfigError("pipeline.layers", fmt::format("layer {} (\"{}\"): {}", i, s.name, why));
    };
    if (s.name.empty() || s.name.find('.') != std::string::npos) throw bad("a name must be non-empty and without dots");
    if (s.name == kTiedModules) throw bad(std::string("\"") + kTiedModules + "\" holds the tied modules; rename it");
    if (!names.insert(s.name).second) throw bad("the name is given twice");
    if (s.tied_key.find('.') != std::string::npos) throw bad("a tied_key has no dots");
    if (!s.build || !s.forward) throw bad("needs both build and forward");
  }
}

std::string layer_module_path(const LayerSpec& spec) {
  return spec.tied_key.empty() ? spec.name : std::string(kTiedModules) + "." + spec.tied_key;
}

SpecCensus take_census(const std::vector<LayerSpec>& specs, const LayerSeeds& seeds) {
  SpecCensus census;
  std::map<std::string, std::pair<std::vector<std::string>, int64_t>> tied;  // key -> its names, trainable
  for (size_t i = 0; i < specs.size(); ++i) {
    const LayerSpec& s = specs[i];
    if (auto it = tied.find(s.tied_key); !s.tied_key.empty() && it != tied.end()) {
      census.param_names.push_back(it->second.first);
      census.trainable.push_back(it->second.second);
      continue;
    }
    std::vector<std::string> names;
    int64_t trainable = 0;
    {
      const auto module = build_one(s, int(i), seeds);  // dropped at the end of this scope
      for (const auto& p : module->named_parameters(/*recurse=*/true)) {
        names.push_back(layer_module_path(s) + "." + p.key());
        if (p.value().requires_grad()) {
          trainable += p.value().numel();
          census.trainable_names.insert(names.back());
        }
      }
    }
    if (!s.tied_key.empty()) tied[s.tied_key] = {names, trainable};
    census.param_names.push_back(std::move(names));
    census.trainable.push_back(trainable);
  }
  return census;
}

BuiltLayers build_layers(const std::vector<LayerSpec>& specs, const SpecCensus& census, int begin, int end,
                         const LayerSeeds& seeds) {
  BuiltLayers out;
  out.model = std::make_shared<torch::nn::Module>("LayerSpecModel");
  std::shared_ptr<torch::nn::Module> tied_holder;
  std::map<std::string, std::shared_ptr<torch::nn::Module>> tied;
  for (int i = 0; i < int(specs.size()); ++i) {
    const LayerSpec& s = specs[size_t(i)];
    std::function<torch::Tensor(const torch::Tensor&)> forward;
    if (i >= begin && i < end) {
      std::shared_ptr<torch::nn::Module> module;
      if (s.tied_key.empty()) {
        module = out.model->register_module(s.name, build_one(s, i, seeds));
      } else if (auto it = tied.find(s.tied_key); it != tied.end()) {
        module = it->second;
      } else {
        if (!tied_holder) tied_holder = out.model->register_module(kTiedModules, std::make_shared<torch::nn::Module>());
        module = tied[s.tied_key] = tied_holder->register_module(s.tied_key, build_one(s, i, seeds));
      }
      forward = [module, f = s.forward](const torch::Tensor& x) { return f(*module, x); };
    } else {
      forward = [name = s.name](const torch::Tensor&) -> torch::Tensor {
        throw Error("pipeline: layer \"" + name + "\" is built on another stage");
      };
    }
    out.layers.add(s.name, std::move(forward), census.param_names[size_t(i)]);
  }
  return out;
}

}  // namespace ds::parallel
