#include "zero/param_coordinator.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include "util/error.h"
#include "zero/reuse_plan.h"
#include "util/logging.h"

namespace ds::zero {
namespace {

// Identity in forward; in backward, asks the coordinator to gather layer `index` before autograd
// reaches the layer's own backward nodes (which all depend on this output's gradient).
struct GatherBeforeBackward : public torch::autograd::Function<GatherBeforeBackward> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t coordinator,
                               int64_t index) {
    ctx->saved_data["coordinator"] = coordinator;
    ctx->saved_data["index"] = index;
    return x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* self = reinterpret_cast<ParamCoordinator*>(ctx->saved_data["coordinator"].toInt());
    self->before_backward(static_cast<size_t>(ctx->saved_data["index"].toInt()));
    return {grads[0], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

ParamCoordinator::ParamCoordinator(ShardedParameters& params, const nn::LayerList& layers, const ZeroConfig& zero)
    : params_(params), layers_(layers), zero_(zero) {
  std::vector<bool> listed(params.size(), false);
  for (const auto& layer : layers) {
    std::vector<size_t> ids;
    for (const auto& name : layer.param_names) {
      auto id = params.find(name);
      if (!id) continue;  // frozen parameters are not sharded
      ids.push_back(*id);
      listed[*id] = true;
    }
    layer_params_.push_back(std::move(ids));
  }
  std::vector<std::string> names;
  for (size_t id = 0; id < params.size(); ++id) {
    if (listed[id]) continue;
    unlisted_.push_back(id);
    names.push_back(params[id].name);
  }
  if (!names.empty()) {
    log::warn("ZeRO stage 3: {} trainable parameter(s) are in no LayerList layer and stay gathered "
              "(list them in a layer's param_names to partition them): {}",
              names.size(), fmt::join(names, ", "));
    params_.gather(unlisted_);
    for (size_t id : unlisted_) params_[id].holds += 1;
  }
}

ParamCoordinator::~ParamCoordinator() {
  if (inflight_) {
    try {
      params_.finish(std::move(inflight_));
    } catch (...) {  // destructors never throw; the communicator reports the failure elsewhere
    }
  }
}

int64_t ParamCoordinator::missing_numel(size_t layer) const {
  int64_t n = 0;
  for (size_t id : layer_params_[layer])
    if (!params_[id].gathered) n += params_[id].numel;
  return n;
}

void ParamCoordinator::fetch(size_t layer, GatherFor purpose) {
  const size_t at = order_.size();
  on_trace_ = on_trace_ && order_recorded_ && at < first_order_.size() && first_order_[at] == layer;
  order_.push_back(layer);
  if (inflight_) {  // usually this very layer, prefetched; either way it completes first
    params_.finish(std::move(inflight_));
  }
  params_.gather(layer_params_[layer], purpose);
}

void ParamCoordinator::prefetch(size_t layer, GatherFor purpose) {
  if (layer >= layer_params_.size() || inflight_) return;
  const int64_t need = missing_numel(layer);
  if (need == 0 || need > zero_.prefetch_bucket_size) return;
  if (params_.live_numel() + need > zero_.max_live_parameters) return;
  inflight_ = params_.gather_async(layer_params_[layer], purpose);
  inflight_layer_ = layer;
}

void ParamCoordinator::before_forward(std::size_t index) {
  // A forward that began while the previous one had no backward (evaluation): forget its fetches,
  // so the order check compares training passes only.
  if (index == 0) {
    order_.clear();
    on_trace_ = true;
  }
  fetch(index, GatherFor::Forward);
  prefetch(index + 1, GatherFor::Forward);
  running_ = index;
}

void ParamCoordinator::after_forward(std::size_t index) {
  running_.reset();
  const size_t at = order_.empty() ? 0 : order_.size() - 1;  // this layer's fetch
  // Evaluation keeps nothing; a checkpointed segment's forward keeps what its recompute will use.
  const bool backward_follows = nn::backward_follows();
  const auto& ids = layer_params_[index];
  for (size_t k = 0; k < ids.size(); ++k)
    if (!backward_follows || !reused_soon(at, k)) params_.release(ids[k]);
}

bool ParamCoordinator::reused_soon(size_t at, size_t k) const {
  return on_trace_ && at < keep_.size() && k < keep_[at].size() && keep_[at][k];
}

void ParamCoordinator::record_trace() {
  first_order_ = order_;
  order_recorded_ = !order_.empty();
  std::vector<int64_t> numels;
  for (size_t id = 0; id < params_.size(); ++id) numels.push_back(params_[id].numel);
  keep_ = reuse_plan(first_order_, layer_params_, numels, zero_.max_reuse_distance);
}

std::string ParamCoordinator::running_layer() const {
  return running_ ? "\"" + layers_[*running_].name + "\"" : std::string("outside the LayerList");
}

torch::Tensor ParamCoordinator::wrap_output(std::size_t index, torch::Tensor out) {
  if (!torch::GradMode::is_enabled() || !out.requires_grad()) return out;
  return GatherBeforeBackward::apply(out, reinterpret_cast<int64_t>(this), static_cast<int64_t>(index));
}

void ParamCoordinator::before_backward(std::size_t index) {
  fetch(index, GatherFor::Backward);
  if (index > 0) prefetch(index - 1, GatherFor::Backward);
}

void ParamCoordinator::end_pass() {
  if (inflight_) params_.finish(std::move(inflight_));
  for (const auto& ids : layer_params_)
    for (size_t id : ids) params_.release(id);
  if (!order_recorded_) {
    record_trace();
  } else if (order_ != first_order_ && (!order_warned_ || zero_.log_trace_cache_warnings)) {
    // Once; every time with log_trace_cache_warnings (DeepSpeed's trace-cache invalidation warnings).
    order_warned_ = true;
    log::warn("ZeRO stage 3: layers were fetched in a different order than in the first step "
              "({} fetches, first step {}); prefetching follows the layer list, so a changing order "
              "costs gathers but not correctness{}",
              order_.size(), first_order_.size(),
              zero_.log_trace_cache_warnings ? "" : " (said once; log_trace_cache_warnings: every time)");
  }
  order_.clear();
}

}  // namespace ds::zero
