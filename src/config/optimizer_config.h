// The "optimizer" section: {"type": ..., "params": {...}} (reference §9.1). Only the optimizers
// deepspeed.cpp implements have a type; DeepSpeed's others are rejected by name at load time.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ds {

// DeepSpeed lower-cases adam/adamw/adagrad/lamb/lion (so "Adam", "ADAM" all match); other names
// are torch.optim attributes, matched case-sensitively ("SGD").
// The 1-bit family (OneBitAdam, ZeroOneAdam, OneBitLamb: DeepSpeed's runtime/fp16/onebit) compresses
// the data-parallel exchange; DeepSpeed runs them without ZeRO only.
enum class OptimizerType { Adam, AdamW, SGD, Adagrad, Lamb, Lion, OneBitAdam, ZeroOneAdam, OneBitLamb };

inline bool is_onebit(OptimizerType t) {
  return t == OptimizerType::OneBitAdam || t == OptimizerType::ZeroOneAdam || t == OptimizerType::OneBitLamb;
}

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
  double max_coeff = 10.0;                  // Lamb, OneBitLamb: trust-ratio clamp
  double min_coeff = 0.01;                  // Lamb, OneBitLamb
  bool eps_inside_sqrt = false;             // Lamb (the 1-bit family accepts it and, like DeepSpeed, ignores it)
  // The 1-bit family. DeepSpeed's 1-bit optimizers accept bias_correction too and ignore it: their
  // update is exp_avg / (sqrt(exp_avg_sq) + eps), never bias-corrected.
  int64_t freeze_step = 100000;             // OneBitAdam, OneBitLamb: uncompressed warm-up steps
  bool cuda_aware = false;                  // accepted (an MPI-backend setting; our communicator decides)
  std::string comm_backend_name = "nccl";   // accepted: nccl, mpi, hccl, compressed (ours is the engine's)
  int64_t var_freeze_step = 100000;         // ZeroOneAdam: the last step the variance is updated
  int64_t var_update_scaler = 16;           // ZeroOneAdam: variance updates before their interval doubles
  int64_t local_step_scaler = 32678;        // ZeroOneAdam: steps before the local-step interval doubles
  int64_t local_step_clipper = 16;          // ZeroOneAdam: the largest local-step interval
  double coeff_beta = 0.9;                  // OneBitLamb: EMA of the warm-up lamb coefficients
  double factor_max = 4.0;                  // OneBitLamb: bounds of the frozen coefficient's scaling factor
  double factor_min = 0.5;
  double factor_threshold = 0.1;            // OneBitLamb: how far the factor may move per step
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

// The spelling DeepSpeed's docs use: "Adam", "AdamW", "SGD", "Adagrad", "Lamb", "Lion", "OneBitAdam",
// "ZeroOneAdam", "OneBitLamb".
std::string to_string(OptimizerType t);

// Default params of a type (DeepSpeed/torch constructor defaults).
OptimizerParams default_optimizer_params(OptimizerType t);

}  // namespace ds
