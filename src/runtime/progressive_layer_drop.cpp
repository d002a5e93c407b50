#include "runtime/progressive_layer_drop.h"

#include <cmath>

#include "util/splitmix64.h"

namespace ds {

struct ProgressiveLayerDrop::State {
  double theta = 1.0;
  uint64_t micro_batch = 0;
  bool training = false;
};

ProgressiveLayerDrop::ProgressiveLayerDrop(const ProgressiveLayerDropConfig& config)
    : config_(config), state_(std::make_shared<State>()) {}

ProgressiveLayerDrop::~ProgressiveLayerDrop() { state_->training = false; }

double ProgressiveLayerDrop::theta() const { return state_->theta; }

void ProgressiveLayerDrop::update_state(int64_t global_step) {
  state_->theta = (1.0 - config_.theta) * std::exp(-config_.gamma * double(global_step)) + config_.theta;
}

void ProgressiveLayerDrop::restore(int64_t global_steps) {
  if (global_steps > 0) update_state(global_steps - 1);  // the last boundary's update
}

void ProgressiveLayerDrop::select(uint64_t micro_batch, bool training) {
  state_->micro_batch = micro_batch;
  state_->training = training;
}

double ProgressiveLayerDrop::keep_probability(int block, int blocks, double theta) {
  return 1.0 - double(block) / double(blocks) * (1.0 - theta);
}

bool ProgressiveLayerDrop::keeps(uint64_t micro_batch, int block, double probability) {
  // Hashed twice so that neighbouring (micro-batch, block) pairs draw independently.
  const uint64_t h = splitmix64(splitmix64(micro_batch) ^ uint64_t(block));
  const double u = double(h >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  return u < probability;
}

int ProgressiveLayerDrop::wrap_blocks(nn::LayerList& layers) {
  int wrapped = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const nn::Layer& layer = layers[i];
    if (layer.block <= 0) continue;
    layers.replace_forward(i, [run = layer.forward, block = layer.block, blocks = layer.blocks,
                               state = state_](const torch::Tensor& x) {
      if (!state->training || state->theta >= 1.0) return run(x);
      const double p = keep_probability(block, blocks, state->theta);
      if (!keeps(state->micro_batch, block, p)) return x;
      return x + (run(x) - x) / p;
    });
    ++wrapped;
  }
  return wrapped;
}

}  // namespace ds
