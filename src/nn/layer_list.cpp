// LayerList: validation on add, the in-order forward with optional hooks, and name collection.
#include "nn/layer_list.h"

#include <unordered_set>

#include "util/error.h"

namespace ds::nn {
namespace {
thread_local bool checkpointed_forward = false;
}  // namespace

bool backward_follows() { return torch::GradMode::is_enabled() || checkpointed_forward; }

BackwardFollowsScope::BackwardFollowsScope() : previous_(checkpointed_forward) { checkpointed_forward = true; }
BackwardFollowsScope::~BackwardFollowsScope() { checkpointed_forward = previous_; }

void LayerList::add(Layer layer) {
  DS_CHECK(!layer.name.empty(), Error,
           "LayerList::add: layer " + std::to_string(layers_.size()) + " has an empty name");
  DS_CHECK(static_cast<bool>(layer.forward), Error,
           "LayerList::add: layer \"" + layer.name + "\" has no forward function");
  for (const auto& existing : layers_) {
    DS_CHECK(existing.name != layer.name, Error,
             "LayerList::add: duplicate layer name \"" + layer.name + "\" (names must be unique)");
  }
  std::unordered_set<std::string> seen;
  for (const auto& p : layer.param_names) {
    DS_CHECK(seen.insert(p).second, Error,
             "LayerList::add: layer \"" + layer.name + "\" lists parameter \"" + p + "\" twice");
  }
  layers_.push_back(std::move(layer));
}

void LayerList::replace_forward(std::size_t i, std::function<torch::Tensor(const torch::Tensor&)> forward) {
  DS_CHECK(i < layers_.size(), Error,
           "LayerList::replace_forward: layer " + std::to_string(i) + " of " + std::to_string(layers_.size()));
  DS_CHECK(static_cast<bool>(forward), Error, "LayerList::replace_forward: no forward function for layer \"" +
                                                  layers_[i].name + "\"");
  layers_[i].forward = std::move(forward);
}

void LayerList::add(std::string name, std::function<torch::Tensor(const torch::Tensor&)> forward,
                    std::vector<std::string> param_names) {
  add(Layer{std::move(name), std::move(forward), std::move(param_names)});
}

const Layer& LayerList::operator[](std::size_t i) const {
  DS_ASSERT(i < layers_.size(), "LayerList index out of range");
  return layers_[i];
}

const Layer& LayerList::at(std::size_t i) const {
  DS_CHECK(i < layers_.size(), Error,
           "LayerList::at: index " + std::to_string(i) + " out of range (the list has " +
               std::to_string(layers_.size()) + " layers)");
  return layers_[i];
}

torch::Tensor LayerList::forward(const torch::Tensor& x) const {
  if (runner_) return runner_->run(*this, x);
  return run_range(0, layers_.size(), x);
}

torch::Tensor LayerList::run_range(std::size_t begin, std::size_t end, const torch::Tensor& x) const {
  DS_ASSERT(begin <= end && end <= layers_.size(), "LayerList::run_range out of range");
  torch::Tensor h = x;
  LayerHooks* hooks = hooks_.get();
  for (std::size_t i = begin; i < end; ++i) {
    if (hooks) hooks->before_forward(i);
    h = layers_[i].forward(h);
    if (hooks) {
      hooks->after_forward(i);
      h = hooks->wrap_output(i, std::move(h));
    }
  }
  return h;
}

std::vector<std::string> LayerList::all_param_names() const {
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  for (const auto& layer : layers_) {
    for (const auto& p : layer.param_names) {
      if (seen.insert(p).second) names.push_back(p);
    }
  }
  return names;
}

}  // namespace ds::nn
