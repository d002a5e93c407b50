// DeepSpeed's progressive layer drop ("progressive_layer_drop", PLD: Zhang & He, 2020). The engine
// keeps theta(t) = (1 - theta) * exp(-gamma * t) + theta, updated at each accumulation boundary
// before the step as DeepSpeed's engine does (1.0 until then; engine.get_pld_theta()).
//
// DeepSpeed hands theta to the model's forward and leaves the dropping to the model. Here the
// engine also does it for models whose LayerList marks residual blocks (nn::Layer::block: GPT-2,
// Llama, OPT): in a training forward, block l of L is kept with probability
// p_l = 1 - (l / L) * (1 - theta), the paper's depth schedule; a kept block's residual branch is
// scaled by 1 / p_l (so the expectation is the full block's), a dropped block is the identity.
// Each draw is a hash of (the micro-batch's place in the global batch order, the block), not a
// random generator: every rank of a tensor- or sequence-parallel group drops the same blocks (their
// collectives stay matched), activation checkpointing's recompute drops what the forward dropped,
// and a run drops the same blocks at any world size and after a resume.
#pragma once

#include <cstdint>
#include <memory>

#include "config/training_schedules_config.h"
#include "nn/layer_list.h"

namespace ds {

class ProgressiveLayerDrop {
 public:
  explicit ProgressiveLayerDrop(const ProgressiveLayerDropConfig& config);
  ~ProgressiveLayerDrop();  // the blocks it wrapped run whole again (the model may outlive the engine)
  ProgressiveLayerDrop(const ProgressiveLayerDrop&) = delete;
  ProgressiveLayerDrop& operator=(const ProgressiveLayerDrop&) = delete;

  double theta() const;
  // DeepSpeed's update_state(global_step), called with the step count before the step.
  void update_state(int64_t global_step);
  // After a checkpoint load at `global_steps`: the theta an uninterrupted run would have now
  // (DeepSpeed restarts it at 1.0 until the next boundary).
  void restore(int64_t global_steps);

  // Wraps every residual block of `layers`; returns how many there are (0: nothing to drop).
  int wrap_blocks(nn::LayerList& layers);
  // The micro-batch the next forward (and its recompute during backward) belongs to: its index in
  // the global order of micro-batches (step, micro-batch of the step, data-parallel rank), and
  // whether it trains (an evaluation forward keeps every block).
  void select(uint64_t micro_batch, bool training);

  // p_l for block l of L at `theta`.
  static double keep_probability(int block, int blocks, double theta);
  // Whether block l is kept for `micro_batch` (the same on every rank).
  static bool keeps(uint64_t micro_batch, int block, double probability);

  struct State;  // shared with the wrappers

 private:
  ProgressiveLayerDropConfig config_;
  std::shared_ptr<State> state_;
};

}  // namespace ds
