// Test helpers for activation checkpointing: LayerHooks
// that behave like ZeRO stage 3's coordinator (release after forward, gather before backward,
// release once AccumulateGrad has the gradient) without a communicator.
#pragma once

#include <c10/core/CPUAllocator.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/layer_list.h"
#include "runtime/cpu_allocation_counter.h"

namespace ds::test {

using ds::CountingCpuAllocator;  // runtime/cpu_allocation_counter.h

// ZeRO stage 3's coordinator in miniature: parameters hold NaN unless their layer is gathered.
class FakeStage3Hooks final : public nn::LayerHooks {
 public:
  FakeStage3Hooks(const nn::LayerList& layers, torch::nn::Module& model) {
    auto named = model.named_parameters();
    std::unordered_map<std::string, size_t> index;
    for (const auto& layer : layers) {
      std::vector<size_t> ids;
      for (const auto& name : layer.param_names) {
        auto [it, added] = index.emplace(name, params_.size());
        if (added) {
          torch::Tensor p = named[name];
          params_.push_back({name, p, p.detach().clone()});
        }
        ids.push_back(it->second);
      }
      layer_ids_.push_back(std::move(ids));
    }
    for (size_t k = 0; k < params_.size(); ++k) {
      // Created while the parameter has its full shape, like the real gradient buckets do.
      auto acc = torch::autograd::impl::grad_accumulator(params_[k].param);
      acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [this, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
            params_[k].fires += 1;
            release(k);
            return outputs;
          }));
      accumulators_.push_back(std::move(acc));
      release(k);
    }
  }

  void before_forward(std::size_t i) override { gather(i); }
  void after_forward(std::size_t i) override {
    for (size_t k : layer_ids_[i]) release(k);
  }
  torch::Tensor wrap_output(std::size_t i, torch::Tensor out) override {
    if (!torch::GradMode::is_enabled() || !out.requires_grad()) return out;
    return GatherFn::apply(out, reinterpret_cast<int64_t>(this), static_cast<int64_t>(i));
  }

  void gather_for_backward(size_t i) {
    backward_gathers_.push_back(i);
    gather(i);
  }
  bool all_released() const {
    return std::none_of(params_.begin(), params_.end(), [](const P& p) { return p.gathered; });
  }
  int accumulate_fires(const std::string& name) const {
    for (const auto& p : params_)
      if (p.name == name) return p.fires;
    return -1;
  }
  torch::Tensor grad(const std::string& name) const {
    for (const auto& p : params_)
      if (p.name == name) return p.param.grad();
    return {};
  }
  const std::vector<size_t>& backward_gathers() const { return backward_gathers_; }

 private:
  struct P {
    std::string name;
    torch::Tensor param, full;
    bool gathered = true;
    int fires = 0;
  };
  struct GatherFn : public torch::autograd::Function<GatherFn> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t self, int64_t i) {
      ctx->saved_data["self"] = self;
      ctx->saved_data["i"] = i;
      return x;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list g) {
      reinterpret_cast<FakeStage3Hooks*>(ctx->saved_data["self"].toInt())
          ->gather_for_backward(static_cast<size_t>(ctx->saved_data["i"].toInt()));
      return {g[0], torch::Tensor(), torch::Tensor()};
    }
  };
  void gather(size_t layer) {
    for (size_t k : layer_ids_[layer]) {
      if (params_[k].gathered) continue;
      params_[k].param.set_data(params_[k].full);
      params_[k].gathered = true;
    }
  }
  void release(size_t k) {
    if (!params_[k].gathered) return;
    auto nan = torch::full({1}, std::numeric_limits<float>::quiet_NaN());
    params_[k].param.set_data(nan.expand(params_[k].full.sizes()));
    params_[k].gathered = false;
  }

  std::vector<P> params_;
  std::vector<std::vector<size_t>> layer_ids_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<size_t> backward_gathers_;
};

}  // namespace ds::test
