// ActivationCheckpointing: segmentation, the segment autograd function (save input + RNG state,
// recompute in backward), host stashing for cpu_checkpointing, profiling and the config rule.
#include "nn/activation_checkpointing.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/custom_function.h>

#include <chrono>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "config/config.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Generators are shared by every op drawing random numbers: touch their state under their mutex
// (the mutex is not held while the segment runs: dropout locks it itself).
torch::Tensor generator_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void set_generator_state(at::Generator gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

at::Generator cpu_generator() { return at::detail::getDefaultCPUGenerator(); }

// Puts the forward's RNG states back for the recompute and restores the current ones afterwards,
// so the recompute draws what the forward drew and the code after backward draws what it would have.
class RngStateSwap {
 public:
  RngStateSwap(const torch::Tensor& cpu_state, const torch::Tensor& device_state, c10::Device device)
      : device_(device) {
    cpu_now_ = generator_state(cpu_generator());
    set_generator_state(cpu_generator(), cpu_state);
    if (device_state.defined()) {
      auto gen = at::globalContext().defaultGenerator(device_);
      device_now_ = generator_state(gen);
      set_generator_state(gen, device_state);
    }
  }
  ~RngStateSwap() {
    try {
      set_generator_state(cpu_generator(), cpu_now_);
      if (device_now_.defined()) set_generator_state(at::globalContext().defaultGenerator(device_), device_now_);
    } catch (...) {  // destructors never throw; the states are plain tensors, this does not fail
    }
  }
  RngStateSwap(const RngStateSwap&) = delete;
  RngStateSwap& operator=(const RngStateSwap&) = delete;

 private:
  c10::Device device_;
  torch::Tensor cpu_now_, device_now_;
};

// One checkpointed segment. Inputs: the segment input x (any dtype; token ids do not require
// grad) and the segment's trainable parameters, so that autograd routes their gradients through
// this node (see the header). Non-tensor arguments carry the runner, the list and the segment.
struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  static constexpr std::size_t kNonTensorArgs = 3;

  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, at::TensorList params, int64_t runner,
                               int64_t list, int64_t segment) {
    auto* self = reinterpret_cast<ActivationCheckpointing*>(runner);
    ctx->saved_data["runner"] = runner;
    ctx->saved_data["list"] = list;
    ctx->saved_data["segment"] = segment;
    ctx->saved_data["x_requires_grad"] = x.requires_grad();
    ctx->saved_data["device"] = x.device();
    ctx->saved_data["params"] = params.vec();  // the same variables: no copy
    ctx->saved_data["cpu_rng"] = generator_state(cpu_generator());
    if (x.is_cuda()) ctx->saved_data["device_rng"] = generator_state(at::globalContext().defaultGenerator(x.device()));
    // save_for_backward keeps the version check: an in-place change to the input before backward
    // is reported instead of silently recomputing from the changed values.
    ctx->save_for_backward({self->stash(x)});
    return self->run_segment_forward(*reinterpret_cast<const LayerList*>(list), static_cast<std::size_t>(segment), x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* self = reinterpret_cast<ActivationCheckpointing*>(ctx->saved_data["runner"].toInt());
    const auto& list = *reinterpret_cast<const LayerList*>(ctx->saved_data["list"].toInt());
    const auto segment = static_cast<std::size_t>(ctx->saved_data["segment"].toInt());
    const bool x_requires_grad = ctx->saved_data["x_requires_grad"].toBool();
    const c10::Device device = ctx->saved_data["device"].toDevice();
    const std::vector<torch::Tensor> params = ctx->saved_data["params"].toTensorVector();
    torch::Tensor device_rng;
    if (ctx->saved_data.count("device_rng")) device_rng = ctx->saved_data["device_rng"].toTensor();

    // A fresh leaf: the recomputed graph ends here, and autograd::grad below stops at it.
    torch::Tensor x = ctx->get_saved_variables()[0].to(device, /*non_blocking=*/true).detach();
    if (x_requires_grad) x.requires_grad_(true);

    const auto t0 = Clock::now();
    torch::Tensor out;
    {
      RngStateSwap rng(ctx->saved_data["cpu_rng"].toTensor(), device_rng, device);
      torch::AutoGradMode grad_mode(true);
      out = self->recompute(list, segment, x);
    }
    const double recompute_s = seconds_since(t0);

    variable_list result(1 + params.size() + kNonTensorArgs);
    std::vector<torch::Tensor> inputs;
    if (x_requires_grad) inputs.push_back(x);
    inputs.insert(inputs.end(), params.begin(), params.end());
    const auto t1 = Clock::now();
    if (!inputs.empty() && out.requires_grad()) {
      // grad(), not backward(): the parameters' gradients come back to this node, and autograd
      // hands them to AccumulateGrad once all uses (in every segment) have contributed.
      auto g = torch::autograd::grad({out}, inputs, {grads[0]}, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true);
      std::size_t k = 0;
      if (x_requires_grad) result[0] = g[k++];
      for (std::size_t i = 0; i < params.size(); ++i) result[1 + i] = g[k++];
    }
    self->record_backward(segment, recompute_s, seconds_since(t1));
    return result;
  }
};

}  // namespace

std::vector<CheckpointSegment> checkpoint_segments(std::size_t num_layers, std::optional<int64_t> number_checkpoints) {
  if (number_checkpoints && *number_checkpoints < 1)
    throw ConfigError("activation_checkpointing.number_checkpoints",
                      std::to_string(*number_checkpoints) + " must be at least 1 (or leave it out: one checkpoint per layer)");
  std::size_t count = num_layers;
  if (number_checkpoints && static_cast<uint64_t>(*number_checkpoints) < num_layers)
    count = static_cast<std::size_t>(*number_checkpoints);
  std::vector<CheckpointSegment> segments;
  std::size_t begin = 0;
  for (std::size_t s = 0; s < count; ++s) {
    const std::size_t size = num_layers / count + (s < num_layers % count ? 1 : 0);
    segments.push_back({begin, begin + size});
    begin += size;
  }
  return segments;
}

ActivationCheckpointing::ActivationCheckpointing(const ActivationCheckpointingConfig& config, const LayerList& layers,
                                                 const torch::nn::Module& model)
    : config_(config), segments_(checkpoint_segments(layers.size(), config.number_checkpoints)),
      num_layers_(layers.size()) {
  std::unordered_map<std::string, torch::Tensor> by_name;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) by_name.emplace(item.key(), item.value());
  for (const auto& layer : layers) layer_names_.push_back(layer.name);
  for (const auto& seg : segments_) {
    std::vector<torch::Tensor> params;
    std::unordered_set<const void*> seen;  // a tied parameter listed by two layers of one segment
    for (std::size_t i = seg.begin; i < seg.end; ++i) {
      for (const auto& name : layers[i].param_names) {
        auto it = by_name.find(name);
        DS_CHECK(it != by_name.end(), Error,
                 "activation checkpointing: layer \"" + layers[i].name + "\" lists parameter \"" + name +
                     "\", which the model does not have (param_names must be spelled as named_parameters() spells them)");
        if (seen.insert(it->second.unsafeGetTensorImpl()).second) params.push_back(it->second);
      }
    }
    segment_params_.push_back(std::move(params));
  }
  if (config_.partition_activations)
    log::info("activation_checkpointing.partition_activations: splits saved inputs over the tensor-parallel group "
              "in DeepSpeed; deepspeed.cpp keeps each rank's saved inputs whole (under AutoTP too)");
  log::info("activation checkpointing: {} layers in {} checkpointed segments{}", num_layers_, segments_.size(),
            config_.cpu_checkpointing ? ", inputs kept in host memory" : "");
}

std::vector<torch::Tensor> ActivationCheckpointing::trainable_params(std::size_t segment) const {
  std::vector<torch::Tensor> out;
  for (const auto& p : segment_params_[segment])
    if (p.requires_grad()) out.push_back(p);  // frozen now: no gradient to route
  return out;
}

torch::Tensor ActivationCheckpointing::run(const LayerList& list, const torch::Tensor& x) {
  DS_CHECK(list.size() == num_layers_, Error,
           "activation checkpointing was set up for " + std::to_string(num_layers_) + " layers but the list has " +
               std::to_string(list.size()) + " (apply it again after changing the list)");
  if (!torch::GradMode::is_enabled()) return list.run_range(0, list.size(), x);
  stats_.saved_bytes = 0;
  LayerHooks* hooks = list.hooks();
  torch::Tensor h = x;
  for (std::size_t s = 0; s < segments_.size(); ++s) {
    const auto& seg = segments_[s];
    auto params = trainable_params(s);
    if (params.empty() && !h.requires_grad()) {  // nothing to differentiate: no graph to save anyway
      h = list.run_range(seg.begin, seg.end, h);
      continue;
    }
    h = CheckpointFunction::apply(h, at::TensorList(params), reinterpret_cast<int64_t>(this),
                                  reinterpret_cast<int64_t>(&list), static_cast<int64_t>(s));
    // In layer order, so that backward meets the last layer's first, as it would without checkpointing.
    if (hooks)
      for (std::size_t i = seg.begin; i < seg.end; ++i) h = hooks->wrap_output(i, std::move(h));
  }
  return h;
}

torch::Tensor ActivationCheckpointing::run_segment_forward(const LayerList& list, std::size_t segment,
                                                           const torch::Tensor& x) {
  const auto& seg = segments_[segment];
  synchronize(x);
  const auto t0 = Clock::now();
  BackwardFollowsScope recomputed_in_backward;  // stage 3 may keep parameters for the recompute
  LayerHooks* hooks = list.hooks();
  torch::Tensor h = x;
  for (std::size_t i = seg.begin; i < seg.end; ++i) {
    if (hooks) hooks->before_forward(i);
    h = list[i].forward(h);
    if (hooks) hooks->after_forward(i);  // wrap_output comes after the whole segment (run())
  }
  synchronize(h);
  stats_.forwards += 1;
  stats_.saved_bytes += static_cast<int64_t>(x.numel() * x.element_size());
  if (config_.profile) log::info("activation checkpointing: {} forward {:.3f} ms", describe(segment), seconds_since(t0) * 1e3);
  return h;
}

torch::Tensor ActivationCheckpointing::recompute(const LayerList& list, std::size_t segment, const torch::Tensor& x) {
  const auto& seg = segments_[segment];
  synchronize(x);
  torch::Tensor h = x;
  for (std::size_t i = seg.begin; i < seg.end; ++i) h = list[i].forward(h);  // no hooks: see the header
  synchronize(h);
  return h;
}

torch::Tensor ActivationCheckpointing::stash(const torch::Tensor& x) const {
  // On the CPU the input already lives in host memory: cpu_checkpointing changes nothing there.
  if (!config_.cpu_checkpointing || x.device().is_cpu()) return x.detach();
  auto host = torch::empty(x.sizes(), x.options().device(torch::kCPU).pinned_memory(true));
  host.copy_(x.detach(), /*non_blocking=*/true);
  return host;
}

void ActivationCheckpointing::synchronize(const torch::Tensor& x) const {
  // DeepSpeed's synchronize_checkpoint_boundary: a device sync; CPU ops are already synchronous.
  if (config_.synchronize_checkpoint_boundary && x.is_cuda()) torch::cuda::synchronize(x.device().index());
}

void ActivationCheckpointing::record_backward(std::size_t segment, double recompute_s, double backward_s) {
  stats_.recomputes += 1;
  stats_.recompute_seconds += recompute_s;
  stats_.backward_seconds += backward_s;
  if (config_.profile)
    log::info("activation checkpointing: {} recompute {:.3f} ms, backward {:.3f} ms", describe(segment),
              recompute_s * 1e3, backward_s * 1e3);
}

std::string ActivationCheckpointing::describe(std::size_t segment) const {
  const auto& seg = segments_[segment];
  std::string layers = layer_names_[seg.begin];
  if (seg.end - seg.begin > 1) layers += ".." + layer_names_[seg.end - 1];
  return "segment " + std::to_string(segment) + " (layers " + layers + ")";
}

std::shared_ptr<ActivationCheckpointing> apply_activation_checkpointing(LayerList& layers, const torch::nn::Module& model,
                                                                        const ActivationCheckpointingConfig& config) {
  auto runner = std::make_shared<ActivationCheckpointing>(config, layers, model);
  layers.set_runner(runner);
  return runner;
}

bool activation_checkpointing_requested(const Config& config) {
  static const std::string kPrefix = "activation_checkpointing.";
  for (const auto& v : config.resolved)
    if (v.source == Source::File && v.path.compare(0, kPrefix.size(), kPrefix) == 0) return true;
  return false;
}

}  // namespace ds::nn
