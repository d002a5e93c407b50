// Activation memory of one GPT-2 micro-batch (forward state kept for backward, plus the logits),
// estimated from the shape before any batch is allocated, so ds-train can refuse a micro-batch
// that cannot fit with numbers and the fix instead of an allocator failure minutes in (issue 22,
// item 8). Model states (parameters, gradients, optimizer) are the engine's estimate, not this.
#pragma once

#include <cstdint>
#include <optional>

#include "models/gpt2_config.h"

namespace ds::models {

struct ActivationEstimate {
  double per_layer = 0;   // bytes one block keeps for backward
  double layers = 0;      // all blocks (with checkpointing: segment inputs + one segment recomputed)
  double logits = 0;      // logits, their log-softmax and their gradient (fp32)
  double total() const { return layers + logits; }
};

// `bytes_per_element`: the compute dtype's size (4 fp32, 2 bf16/fp16). `checkpoint_segments`: set
// when activation checkpointing is on (the number of segments; one per layer by default).
// Per block: seq·micro·embd·(kPerToken + kPerScore·heads·seq/embd)·bytes — the constants count the
// tensors our blocks save, fitted to measured peak RSS within 4% on two shapes (gpt2_memory.cpp).
ActivationEstimate estimate_activations(const GPT2Config& shape, int64_t micro, int64_t seq, int bytes_per_element,
                                        std::optional<int64_t> checkpoint_segments = std::nullopt);

}  // namespace ds::models
