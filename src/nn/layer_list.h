// ds::nn::LayerList: the ordered sequence of layers a model runs, which ZeRO stage 3 and pipelines
// walk (DESIGN.md §4). It owns the execution order, not the modules: the model registers its
// modules under its own (Hugging Face) names, and each Layer names the parameters it uses.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ds::nn {

// One step of the sequence. `forward` maps the previous layer's output to this layer's output
// (the first layer receives the model input, e.g. token ids [B,T]).
struct Layer {
  std::string name;                                              // "embed", "h.3", "head"
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  // Dotted names as model->named_parameters() spells them. Contract: every parameter the layer
  // reads is listed; a parameter shared by several layers (a tied embedding) is listed in each.
  std::vector<std::string> param_names;
  // A residual block (output = input + f(input), same shape), block `block` of the model's `blocks`
  // (1-based): progressive layer drop may skip it (runtime/progressive_layer_drop.h). 0: not one.
  int block = 0, blocks = 0;
};

// Observer called around each layer by LayerList::forward: the stage-3 coordinator gathers layer
// i's parameters in before_forward(i) (and prefetches i+1) and releases them in after_forward(i).
// If a layer throws, after_forward for that layer is not called.
class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void before_forward(std::size_t index) {}
  virtual void after_forward(std::size_t index) {}
  // Called on layer i's output after after_forward(i); may wrap it (stage 3 inserts an autograd
  // function there whose backward gathers layer i's parameters again before its gradients).
  virtual torch::Tensor wrap_output(std::size_t index, torch::Tensor out) { return out; }
};

// Whether a backward will differentiate the forward running now on this thread: grad mode is on, or
// activation checkpointing runs a segment without a graph that its backward recomputes. Hooks that
// keep what a backward needs (stage 3's stage3_max_reuse_distance) ask this, not GradMode.
bool backward_follows();

// Marks the forwards in its scope (on this thread) as ones a backward follows although grad mode is
// off: activation checkpointing's segment forwards.
class BackwardFollowsScope {
 public:
  BackwardFollowsScope();
  ~BackwardFollowsScope();
  BackwardFollowsScope(const BackwardFollowsScope&) = delete;
  BackwardFollowsScope& operator=(const BackwardFollowsScope&) = delete;

 private:
  bool previous_;
};

class LayerList;

// Replaces how LayerList::forward runs the layers (activation checkpointing installs one,
// nn/activation_checkpointing.h). A runner must call the list's hooks as forward() documents.
class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  virtual torch::Tensor run(const LayerList& list, const torch::Tensor& x) = 0;
};

class LayerList {
 public:
  // Appends a layer. Throws ds::Error for an empty or duplicate name, a missing forward, or a
  // parameter name listed twice in the same layer.
  void add(Layer layer);
  void add(std::string name, std::function<torch::Tensor(const torch::Tensor&)> forward,
           std::vector<std::string> param_names);
  // Replaces layer i's forward (a layer a process does not hold throws instead: nn/placeholder.h).
  // Throws ds::Error for an index out of range or a missing forward.
  void replace_forward(std::size_t i, std::function<torch::Tensor(const torch::Tensor&)> forward);

  std::size_t size() const noexcept { return layers_.size(); }
  bool empty() const noexcept { return layers_.empty(); }
  const Layer& operator[](std::size_t i) const;  // internal invariant: i < size()
  const Layer& at(std::size_t i) const;          // throws ds::Error naming i and size()
  std::vector<Layer>::const_iterator begin() const noexcept { return layers_.begin(); }
  std::vector<Layer>::const_iterator end() const noexcept { return layers_.end(); }

  // Runs every layer in order (identity for an empty list), calling the hooks if set; with a
  // runner installed, the runner does it.
  torch::Tensor forward(const torch::Tensor& x) const;
  // Layers [begin, end) in place, with the hooks: forward() without a runner is run_range(0, size()).
  torch::Tensor run_range(std::size_t begin, std::size_t end, const torch::Tensor& x) const;

  // Every parameter name, each once, in first-use order (a tied parameter appears once).
  std::vector<std::string> all_param_names() const;

  // Installs (or with nullptr removes) the hooks forward() calls. Default: none.
  void set_hooks(std::shared_ptr<LayerHooks> hooks) { hooks_ = std::move(hooks); }
  LayerHooks* hooks() const noexcept { return hooks_.get(); }

  // Installs (or with nullptr removes) the runner forward() delegates to. Independent of the
  // hooks: stage 3 sets hooks, activation checkpointing sets a runner, in either order.
  void set_runner(std::shared_ptr<LayerRunner> runner) { runner_ = std::move(runner); }
  LayerRunner* runner() const noexcept { return runner_.get(); }

 private:
  std::vector<Layer> layers_;
  std::shared_ptr<LayerHooks> hooks_;
  std::shared_ptr<LayerRunner> runner_;
};

}  // namespace ds::nn
