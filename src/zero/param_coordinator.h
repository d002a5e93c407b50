// Stage 3's parameter coordinator (DESIGN §4): installed as the LayerList's hooks, it makes each
// layer's parameters present exactly while they are needed.
//   forward   before layer i: finish (or start) gathering i, start prefetching i+1;
//             after layer i: release i's non-persistent parameters.
//   backward  an identity autograd function on layer i's output gathers i again (and prefetches
//             i-1) before autograd computes i's gradients; each parameter is released as soon as its
//             gradient has been taken by the gradient reducer (param_done).
// Prefetch respects stage3_prefetch_bucket_size and stage3_max_live_parameters. The layer order of
// the first step is recorded (forward and backward fetches: DeepSpeed's trace); a later step that
// fetches in another order gets one warning.
// stage3_max_reuse_distance (DeepSpeed's __params_to_release): once the trace is recorded, a layer's
// parameters are not released after its forward when the trace fetches them again before that many
// parameter elements have been fetched from there on. DeepSpeed's default (1e9) so keeps a model
// under a billion parameters gathered from its forward to its backward (no backward gathers: fast);
// 0 releases every layer after its forward (peak: at rest plus about one layer). Evaluation keeps
// nothing; activation checkpointing's segment forwards keep the same as a plain forward
// (nn::backward_follows), so their recomputes reuse the gathers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/zero_config.h"
#include "nn/layer_list.h"
#include "zero/sharded_params.h"

namespace ds::zero {

class ParamCoordinator final : public nn::LayerHooks {
 public:
  ParamCoordinator(ShardedParameters& params, const nn::LayerList& layers, const ZeroConfig& zero);
  ~ParamCoordinator() override;

  void before_forward(std::size_t index) override;
  void after_forward(std::size_t index) override;
  torch::Tensor wrap_output(std::size_t index, torch::Tensor out) override;
  void before_backward(std::size_t index);

  // Parameter `id`'s gradient was taken: it is not needed again in this backward pass.
  void param_done(size_t id) { params_.release(id); }
  // End of a backward pass (or of a forward without one): release what is still gathered and
  // check the fetch order against the first step's.
  void end_pass();

  const std::vector<size_t>& layer_params(size_t layer) const { return layer_params_[layer]; }
  // Parameters used by no layer: kept gathered (a warning at init names them).
  const std::vector<size_t>& unlisted() const { return unlisted_; }
  // The layer whose forward runs now, quoted ("h.3"), or "outside the LayerList".
  std::string running_layer() const;

 private:
  void fetch(size_t layer, GatherFor purpose);
  void prefetch(size_t layer, GatherFor purpose);
  int64_t missing_numel(size_t layer) const;
  void record_trace();  // at the end of the first pass: first_order_ and what to keep where
  // Whether parameter k of the layer fetched at trace position `at` is used again within
  // stage3_max_reuse_distance elements (false before the trace is recorded or off it).
  bool reused_soon(size_t at, size_t k) const;

  ShardedParameters& params_;
  const nn::LayerList& layers_;
  const ZeroConfig& zero_;
  std::optional<size_t> running_;  // the layer between before_forward and after_forward
  std::vector<std::vector<size_t>> layer_params_;
  std::vector<size_t> unlisted_;
  std::unique_ptr<ShardedParameters::Pending> inflight_;
  size_t inflight_layer_ = 0;
  std::vector<size_t> order_, first_order_;  // layers fetched this pass / in the first pass
  bool order_recorded_ = false, order_warned_ = false;
  bool on_trace_ = true;                      // this pass has fetched first_order_'s prefix so far
  std::vector<std::vector<bool>> keep_;       // [trace position][param of that layer]: reused soon
};

}  // namespace ds::zero
