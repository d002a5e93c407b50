// DeepSpeed's LayerSpec and TiedLayerSpec: a pipeline layer given by how to build it, so each stage
// builds only its own layers and no rank ever holds the whole model (PipelineModule's LayerSpec
// constructor, parallel/pipe_module.h). To partition by parameter count every rank builds each layer
// once, one at a time, and drops it (DeepSpeed's _count_layer_params does the same): at most one
// layer beyond the stage's own is ever alive.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "nn/layer_list.h"

namespace ds::parallel {

struct LayerSpec {
  // The layer's name and its module's: a name without dots ("embed", "block3"); the module's
  // parameters are "<name>.<parameter>" in checkpoints, so two cuts of the same specs agree.
  std::string name;
  std::function<std::shared_ptr<torch::nn::Module>()> build;
  // The layer's step on the built module (DeepSpeed's forward_fn; C++ cannot call an arbitrary
  // module's forward without knowing its type).
  std::function<torch::Tensor(torch::nn::Module&, const torch::Tensor&)> forward;
  // TiedLayerSpec's key (no dots): the layers with one key share one module, built once on each
  // stage that runs any of them (by the first such layer's build) and registered as
  // "tied_modules.<key>"; stages holding it keep its copies equal (PipelineModule's tied
  // parameters). Empty: not tied.
  std::string tied_key{};
};

// DeepSpeed's PipelineModule(seed_layers, base_seed): with seed_layers each layer is built right
// after torch::manual_seed(base_seed + its index), so its initial values do not depend on which
// stage builds it.
struct LayerSeeds {
  bool seed_layers = false;
  int64_t base_seed = 1234;
};

// What every layer holds, learnt by building each once (a tied module once per key).
struct SpecCensus {
  std::vector<std::vector<std::string>> param_names;  // per layer, "<module path>.<parameter>"
  std::vector<int64_t> trainable;                     // per layer: requires_grad elements
  std::unordered_set<std::string> trainable_names;
};

// The layers [begin, end) built, and a LayerList of every layer.
struct BuiltLayers {
  std::shared_ptr<torch::nn::Module> model;  // the built modules, each under its path
  nn::LayerList layers;  // built layers run; the others keep their names and throw when run
};

// ds::ConfigError naming `pipeline.layers` for an empty or dotted or repeated name, a dotted key,
// or a missing build or forward.
void check_layer_specs(const std::vector<LayerSpec>& specs);
// "block3", or "tied_modules.<key>" for a tied layer.
std::string layer_module_path(const LayerSpec& spec);
SpecCensus take_census(const std::vector<LayerSpec>& specs, const LayerSeeds& seeds);
BuiltLayers build_layers(const std::vector<LayerSpec>& specs, const SpecCensus& census, int begin, int end,
                         const LayerSeeds& seeds);

}  // namespace ds::parallel
