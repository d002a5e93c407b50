// The "optimizer" section: {"type": ..., "params": {...}} (reference §9.1). Only the optimizers
// deepspeed.cpp implements have a type; DeepSpeed's others are rejected by name at load time.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ds {

// DeepSpeed lower-cases adam/adamw/adagrad/lamb/lion (so "Adam", "ADAM" all match); other names
// are torch.optim attributes, matched case-sensitively ("SGD").
enum class OptimizerType { Adam, AdamW, SGD, Adagrad, Lamb, Lion };

// One struct for every type; the loader fills the defaults of the chosen type first (Adagrad:
// lr 1e-2, eps 1e-10; Lion: betas (0.9, 0.99)) and accepts only that type's keys.
struct OptimizerParams {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};  // Adam, AdamW, Lamb, Lion
  double eps = 1e-8;                        // Adam, AdamW, Lamb, Adagrad
  double weight_decay = 0.0;
  bool bias_correction = true;              // Adam, AdamW, Lamb
  bool adam_w_mode = true;                  // Adam, AdamW (DeepSpeed pops it before the ctor)
  bool torch_adam = false;                  // Adam, AdamW: torch's Adam instead of the fused one
  bool amsgrad = false;                     // Adam, AdamW, Lamb: only false is supported
  double momentum = 0.0;                    // SGD
  double dampening = 0.0;                   // SGD
  bool nesterov = false;                    // SGD
  double lr_decay = 0.0;                    // Adagrad
  double initial_accumulator_value = 0.0;   // Adagrad
  double max_coeff = 10.0;                  // Lamb: trust-ratio clamp
  double min_coeff = 0.01;                  // Lamb
  bool eps_inside_sqrt = false;             // Lamb
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::Adam;
  OptimizerParams params;
  bool legacy_fusion = false;  // DeepSpeed's "optimizer.legacy_fusion"

  // DeepSpeed's effective AdamW: type AdamW, or Adam with adam_w_mode (the default!).
  bool decoupled_weight_decay() const {
    return type == OptimizerType::AdamW || (type == OptimizerType::Adam && params.adam_w_mode);
  }
};

// The spelling DeepSpeed's docs use: "Adam", "AdamW", "SGD", "Adagrad", "Lamb", "Lion".
std::string to_string(OptimizerType t);

// Default params of a type (DeepSpeed/torch constructor defaults).
OptimizerParams default_optimizer_params(OptimizerType t);

}  // namespace ds
