#include "parallel/pipe_module.h"

#include <fmt/format.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "nn/activation_checkpointing.h"
#include "nn/tensor_buffer.h"
#include "parallel/pipe_partition.h"
#include "util/error.h"
#include "util/system_info.h"

namespace ds::parallel {
namespace {

std::string format_count(int64_t n) {
  if (n >= 1'000'000) return fmt::format("{:.1f}M", double(n) / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}k", double(n) / 1e3);
  return std::to_string(n);
}

// "transformer.h.3.ln_1.weight" -> "transformer.h.3.ln_1": the module that registers the parameter.
std::string owner_of(const std::string& param) {
  const size_t dot = param.rfind('.');
  return dot == std::string::npos ? std::string() : param.substr(0, dot);
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t dot = path.find('.', begin);
    parts.push_back(path.substr(begin, dot - begin));
    if (dot == std::string::npos) return parts;
    begin = dot + 1;
  }
}

// Puts torch's global CPU generator back as it was when constructed.
class CpuGeneratorRestore {
 public:
  CpuGeneratorRestore() : gen_(at::detail::getDefaultCPUGenerator()) {
    std::lock_guard<std::mutex> lock(gen_.mutex());
    state_ = gen_.get_state();
  }
  ~CpuGeneratorRestore() {
    std::lock_guard<std::mutex> lock(gen_.mutex());
    gen_.set_state(state_);
  }
  CpuGeneratorRestore(const CpuGeneratorRestore&) = delete;
  CpuGeneratorRestore& operator=(const CpuGeneratorRestore&) = delete;

 private:
  at::Generator gen_;
  torch::Tensor state_;
};

}  // namespace

PipelineModule::PipelineModule(std::shared_ptr<torch::nn::Module> model, const nn::LayerList& layers,
                               std::shared_ptr<Topology> topology, PipelineModuleOptions options)
    : model_(std::move(model)), layers_(&layers), topology_(std::move(topology)), options_(std::move(options)) {
  DS_CHECK(model_ && topology_, Error, "PipelineModule: model and topology are required");
  partition(count_trainable());
  take_stage();
}

PipelineModule::PipelineModule(const ModelBuilder& build, std::shared_ptr<Topology> topology,
                               PipelineModuleOptions options)
    : topology_(std::move(topology)), options_(std::move(options)) {
  DS_CHECK(build && topology_, Error, "PipelineModule: a model builder and a topology are required");
  auto built = [&](BuiltModel m, const char* which) {
    DS_CHECK(m.model && m.layers, Error, fmt::format("PipelineModule: the model builder returned no model or no "
                                                     "LayerList for the {}", which));
    return m;
  };
  {
    CpuGeneratorRestore restore;  // the stage's build below draws what a whole model's build would
    BuiltModel census = built(build(nn::LayerSelection::none()), "census (no layer materialised)");
    model_ = census.model;
    layers_ = census.layers;
    partition(count_trainable());
  }
  const size_t layer_count = layers_->size();
  BuiltModel stage = built(build(nn::LayerSelection::range(size_t(parts_[size_t(stage_)]),
                                                           size_t(parts_[size_t(stage_) + 1]))),
                           "stage's layers");
  model_ = std::move(stage.model);  // the census model goes
  layers_ = stage.layers;
  DS_CHECK(layers_->size() == layer_count, Error,
           fmt::format("PipelineModule: the model builder gave {} layers for the census but {} for stage {}: it must "
                       "build the same model whatever the selection",
                       layer_count, layers_->size(), stage_));
  take_stage();
}

std::vector<int64_t> PipelineModule::count_trainable() {
  const auto params = model_->named_parameters(/*recurse=*/true);
  for (const auto& p : params)
    if (p.value().requires_grad()) trainable_names_.insert(p.key());
  std::vector<int64_t> trainable;
  for (const auto& layer : *layers_) {
    int64_t n = 0;
    for (const auto& name : layer.param_names)
      if (const auto* p = params.find(name); p != nullptr && p->requires_grad()) n += p->numel();
    trainable.push_back(n);
  }
  return trainable;
}

PipelineModule::PipelineModule(const std::vector<LayerSpec>& specs, std::shared_ptr<Topology> topology,
                               PipelineModuleOptions options)
    : topology_(std::move(topology)), options_(std::move(options)) {
  DS_CHECK(topology_ != nullptr, Error, "PipelineModule: a topology is required");
  check_layer_specs(specs);
  SpecCensus census = take_census(specs, options_.seeds);
  trainable_names_ = std::move(census.trainable_names);
  layers_ = &spec_layers_;
  spec_layers_ = build_layers(specs, census, 0, 0, options_.seeds).layers;  // names only, for the partition
  partition(census.trainable);
  BuiltLayers built = build_layers(specs, census, parts_[size_t(stage_)], parts_[size_t(stage_) + 1], options_.seeds);
  model_ = std::move(built.model);
  spec_layers_ = std::move(built.layers);
  take_stage();
}

void PipelineModule::partition(std::vector<int64_t> layer_trainable) {
  stage_ = topology_->coords()[0];
  const int stages = topology_->shape().pipe;
  const nn::LayerList& layers = *layers_;
  if (int(layers.size()) < stages)
    throw ConfigError("pipeline.stages", fmt::format("{} stages for a model of {} layers: every stage needs at least "
                                                     "one layer", stages, layers.size()));
  layer_params_ = std::move(layer_trainable);
  std::vector<PartitionItem> items;
  for (size_t i = 0; i < layers.size(); ++i) items.push_back({layers[i].name, layer_params_[i]});
  parts_ = partition_layers(options_.partition_method, items, stages);
  for (int s = 0; s < stages; ++s)
    if (parts_[size_t(s)] == parts_[size_t(s) + 1])
      throw ConfigError("pipeline.partition", fmt::format("\"{}\" leaves stage {} of {} without layers ({})",
                                                          options_.partition_method, s, stages, describe_partition()));
  for (int s = 0; s < stages; ++s) {
    int64_t trainable = 0;
    for (int i = parts_[size_t(s)]; i < parts_[size_t(s) + 1]; ++i) trainable += layer_params_[size_t(i)];
    if (trainable == 0)  // its optimizer would have nothing to step (DeepSpeed's fails the same way)
      throw ConfigError("pipeline.partition",
                        fmt::format("\"{}\" gives stage {} of {} no trainable parameter, only frozen layers ({}): "
                                    "partition by \"parameters\" (counts trainable ones) or use fewer stages",
                                    options_.partition_method, s, stages, describe_partition()));
  }
}

void PipelineModule::take_stage() {
  const nn::LayerList& layers = *layers_;
  std::unordered_set<std::string> seen;
  for (int i = parts_[size_t(stage_)]; i < parts_[size_t(stage_) + 1]; ++i) {
    stage_layers_.add(layers[size_t(i)]);
    for (const auto& name : layers[size_t(i)].param_names)
      if (seen.insert(name).second) names_.push_back(name);
  }
  register_stage_modules();
  find_tied_parameters();
  release_other_stages();
  if (const int every = options_.activation_checkpoint_interval; every > 0) {
    ActivationCheckpointingConfig ac;
    ac.number_checkpoints = (int64_t(stage_layers_.size()) + every - 1) / every;
    checkpointing_ = nn::apply_activation_checkpointing(stage_layers_, *this, ac);
  } else if (options_.activation_checkpoint_interval < 0) {
    throw ConfigError("pipeline.activation_checkpoint_interval",
                      fmt::format("must be >= 0, got {}", options_.activation_checkpoint_interval));
  }
}

void PipelineModule::register_stage_modules() {
  std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : model_->named_modules(/*name_prefix=*/"", /*include_self=*/false)) modules[item.key()] = item.value();
  std::set<std::pair<size_t, std::string>> owners;  // shallowest first: a module before its children
  for (const auto& name : names_) {
    const std::string owner = owner_of(name);
    DS_CHECK(!owner.empty(), NotSupported,
             fmt::format("PipelineModule: parameter \"{}\" is registered on the model itself; pipeline stages take "
                         "whole submodules, so register it in one", name));
    owners.insert({split_path(owner).size(), owner});
  }
  std::unordered_set<const torch::nn::Module*> real;  // modules of the model registered here
  // The parent of `path`'s last part, placeholders made on the way; null when a module taken whole
  // covers it (what it holds came with that module).
  auto parent_of = [&](const std::vector<std::string>& parts) -> torch::nn::Module* {
    torch::nn::Module* at = this;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto children = at->named_children();
      if (const auto* child = children.find(parts[i])) {
        if (real.count(child->get())) return nullptr;
        at = child->get();
      } else {
        at = at->register_module(parts[i], std::make_shared<torch::nn::Module>()).get();
      }
    }
    return at;
  };
  for (const auto& [depth, path] : owners) {
    const auto found = modules.find(path);
    DS_CHECK(found != modules.end(), Error, "PipelineModule: no module \"" + path + "\" in the model");
    const auto parts = split_path(path);
    torch::nn::Module* at = parent_of(parts);
    if (at == nullptr || at->named_children().find(parts.back()) != nullptr) continue;
    real.insert(at->register_module(parts.back(), found->second).get());
  }
  // A buffer belongs to every stage using a parameter below its module: one on a module the stage
  // takes only in part (a decoder layer's own buffer, the model's rotary cache) is registered by its
  // name beside those parameters, so the stage's checkpoints hold it.
  std::unordered_set<std::string> used{""};  // the stage's parameters' modules and their ancestors
  for (const auto& name : names_) {
    std::string m = owner_of(name);
    while (!m.empty() && used.insert(m).second) m = owner_of(m);
  }
  const auto held = named_buffers(/*recurse=*/true);
  for (const auto& item : model_->named_buffers(/*recurse=*/true)) {
    if (!used.count(owner_of(item.key())) || held.contains(item.key())) continue;
    const auto parts = split_path(item.key());
    if (torch::nn::Module* at = parent_of(parts)) at->register_buffer(parts.back(), item.value());
  }
  // Every trainable parameter the stage now holds must be one its layers use: another would be
  // stepped with no gradient on this stage and a real one on another.
  const std::unordered_set<std::string> mine(names_.begin(), names_.end());
  for (const auto& item : named_parameters(/*recurse=*/true))
    DS_CHECK(!item.value().requires_grad() || mine.count(item.key()), Error,
             fmt::format("PipelineModule: stage {} holds parameter \"{}\" through a module its layers use, but no layer "
                         "of the stage lists it (LayerList param_names must name every parameter a layer reads)",
                         stage_, item.key()));
}

void PipelineModule::find_tied_parameters() {
  // Which stages use each parameter, in the model's first-use order (the same on every rank).
  std::map<std::string, std::set<int>> users;
  std::vector<std::string> order;
  for (int s = 0; s < num_stages(); ++s)
    for (int i = parts_[size_t(s)]; i < parts_[size_t(s) + 1]; ++i)
      for (const auto& name : (*layers_)[size_t(i)].param_names) {
        if (!users.count(name)) order.push_back(name);
        users[name].insert(s);
      }
  comm::Communicator& world = topology_->world();
  const int per_stage = topology_->world_size() / num_stages();
  const int other = topology_->rank() % per_stage;
  std::map<std::set<int>, std::shared_ptr<comm::Communicator>> groups;  // one split per set of stages
  const auto params = model_->named_parameters(/*recurse=*/true);
  for (const auto& name : order) {
    const std::set<int>& stages = users[name];
    if (stages.size() < 2) continue;
    const bool here = stages.count(stage_) > 0;
    if (!groups.count(stages)) {
      std::unique_ptr<comm::Communicator> g =
          world.split(here ? other : comm::Communicator::kNoGroup, stage_, "pipe_tied_group");
      groups[stages] = std::shared_ptr<comm::Communicator>(std::move(g));
    }
    TiedParameter t{name, std::vector<int>(stages.begin(), stages.end()), groups[stages], here && *stages.begin() == stage_};
    if (here) {  // the copies start equal: the first stage's (DeepSpeed's _synchronize_tied_weights)
      torch::NoGradGuard no_grad;
      torch::Tensor p = params[name];
      DS_CHECK(p.is_contiguous(), NotSupported, "PipelineModule: tied parameter \"" + name + "\" is not contiguous");
      t.group->broadcast(nn::as_buffer(p), 0, "pipe_tied_broadcast");
    }
    // A frozen one (LoRA's base embedding) stays equal by itself: no gradient to sum, no optimizer
    // copy to leave out of a checkpoint.
    if (trainable_names_.count(name)) tied_.push_back(std::move(t));
  }
}

void PipelineModule::release_other_stages() {
  // The other stages' parameters are never read here: keep their names, drop their storage.
  const std::unordered_set<std::string> mine(names_.begin(), names_.end());
  torch::NoGradGuard no_grad;
  for (auto& item : model_->named_parameters(/*recurse=*/true))
    if (!mine.count(item.key())) item.value().set_data(torch::empty({0}, item.value().options()));
  release_free_heap_memory();
}

torch::Tensor PipelineModule::forward(const torch::Tensor& x) { return stage_layers_.forward(x); }

torch::Tensor PipelineModule::loss(const torch::Tensor& outputs, const torch::Tensor& labels) const {
  DS_CHECK(options_.loss_fn != nullptr, Error,
           "PipelineModule: the last stage needs a loss_fn to train (PipelineModuleOptions::loss_fn, DeepSpeed's "
           "PipelineModule(loss_fn=...))");
  return options_.loss_fn(outputs, labels);
}

void PipelineModule::use_side_inputs(const std::vector<torch::Tensor>& side) const {
  if (!options_.use_side_inputs) {
    DS_CHECK(side.empty(), Error,
             "pipeline: the batches carry side tensors (PipeBatch::side) but the PipelineModule has no "
             "use_side_inputs (PipelineModuleOptions::use_side_inputs) to give them to the layers");
    return;
  }
  options_.use_side_inputs(side);
}

std::string PipelineModule::describe_partition() const {
  std::string out;
  for (int s = 0; s < num_stages(); ++s) {
    const int b = parts_[size_t(s)], e = parts_[size_t(s) + 1];
    int64_t n = 0;
    for (int i = b; i < e; ++i) n += layer_params_[size_t(i)];
    out += fmt::format("{}stage {}: layers {}-{} ({} .. {}), {} parameters", s ? "; " : "", s, b, e - 1,
                       b < e ? (*layers_)[size_t(b)].name : "", b < e ? (*layers_)[size_t(e) - 1].name : "",
                       format_count(n));
  }
  return out;
}

}  // namespace ds::parallel
