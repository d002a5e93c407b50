// The 1-bit family (DeepSpeed's runtime/fp16/onebit): optimizers that replace the data-parallel
// gradient all-reduce with a 1-bit compressed exchange (comm/compressed_allreduce.h) once a warm-up
// has settled the variance.
//   OneBitAdam   freeze_step warm-up of plain (uncorrected) Adam on all-reduced gradients, then the
//                variance is frozen and each rank's momentum is exchanged compressed instead.
//   ZeroOneAdam  the variance is updated on an exponentially spaced schedule (all-reduced gradients
//                on those steps, compressed gradients on the others) until var_freeze_step; then
//                ranks take local steps and sync their accumulated updates, compressed.
//   OneBitLamb   freeze_step warm-up of Lamb recording its trust ratios, then compressed momentum with
//                the frozen ratio scaled by how far the fresh variance has moved.
// Like DeepSpeed: the first step() only sets up (nothing is updated), updates are never
// bias-corrected, weight decay is added to the update (decoupled), and the engine all-reduces the
// gradients only while wants_reduced_gradients() says so.
// Unlike DeepSpeed: no variance, no step. 1-bit compression cannot represent zero, so an element whose
// (frozen) variance is exactly zero — a parameter that had no gradient in the warm-up, like the
// embedding row of a token not seen yet — gets +-scale of noise as momentum, which DeepSpeed divides by
// eps (an update of ~1e5 x lr) unless the user passed an exp_avg_mask. Here the momentum of such
// elements is kept at zero after every compressed exchange: DeepSpeed's exp_avg_mask, derived. A
// user's exp_avg_mask multiplies the momentum at the same points, as DeepSpeed's does.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "comm/compressed_allreduce.h"
#include "config/optimizer_config.h"

namespace ds::optim {

// A parameter's elements [offset, offset + numel) in its group's flat span.
struct ParamSpan {
  int64_t offset = 0;
  int64_t numel = 0;
  // Has copies elsewhere that must get the same update (a pipeline's tied parameter on other stages):
  // an optimizer that couples parameters (OneBitLamb's one exchanged tensor) keeps it apart.
  bool apart = false;
};

// One flat group as the 1-bit family steps it: fp32 spans of `numel` elements each.
struct CompressedGroup {
  float* param = nullptr;
  float* grad = nullptr;        // this step's gradient (0/1 Adam may exchange it in place)
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  float* exp_avg_sq_fresh = nullptr;  // OneBitLamb only
  const float* exp_avg_mask = nullptr;  // the user's (ParamGroup::exp_avg_mask, 1 on padding) or null
  int64_t numel = 0;
  double lr = 1e-3, weight_decay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

class CompressedOptimizer {
 public:
  virtual ~CompressedOptimizer() = default;

  // Whether the engine must all-reduce the gradients before the next step() (DeepSpeed's
  // enable_backward_allreduce): true in warm-up, false once the optimizer exchanges for itself.
  virtual bool wants_reduced_gradients() const = 0;
  // One step of every group (the same groups, in the same order, every time). Collective over the
  // data-parallel group when it compresses.
  virtual void step(std::span<const CompressedGroup> groups) = 0;
  // Counters and per-parameter scalars for checkpoints (the moments are the caller's tensors).
  virtual nlohmann::json state_json() const = 0;
  // Restores them (0/1 Adam's updates accumulated since its last sync restart from zero).
  virtual void load_state_json(const nlohmann::json& j) = 0;
  // This rank's error-feedback buffers (they differ per rank), for its checkpoint file; and back:
  // load_errors(empty or of another length) zeroes them, as DeepSpeed always does on load. Returns
  // whether they were restored.
  std::vector<float> errors() const { return exchange().errors(); }
  bool load_errors(std::span<const float> saved);
  // The phase for logs: "warm-up", "compressed", "local steps".
  virtual std::string phase() const = 0;
  // Bytes this object holds (error buffers, exchange buffers, 0/1 Adam's accumulator).
  virtual int64_t held_bytes() const = 0;
  int64_t steps() const { return step_; }

 protected:
  virtual const comm::CompressedAllReduce& exchange() const = 0;
  virtual comm::CompressedAllReduce& exchange() = 0;
  int64_t step_ = 0;  // DeepSpeed's state['step']: every step() call, the set-up one included
};

// The element counts of every parameter, group after group: the exchange's tensors, in order.
std::vector<int64_t> param_numels(const std::vector<std::vector<ParamSpan>>& params);

// The per-element states the caller keeps for `type` beside the master: exp_avg, exp_avg_sq (and
// OneBitLamb's exp_avg_sq_fresh).
std::vector<std::string> compressed_state_names(OptimizerType type);

// `params[g]`: the parameters of group g. `comm` (the data-parallel group) must outlive the result.
std::unique_ptr<CompressedOptimizer> make_compressed_optimizer(const OptimizerConfig& config, comm::Communicator& comm,
                                                               const std::vector<std::vector<ParamSpan>>& params);

}  // namespace ds::optim
