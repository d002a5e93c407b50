// Names of the config enums (as DeepSpeed spells them) and per-type defaults.
#include <cmath>

#include "config/config.h"

namespace ds {

std::string to_string(DType t) {
  switch (t) {
    case DType::Fp16: return "fp16";
    case DType::Bf16: return "bf16";
    case DType::Fp32: return "fp32";
  }
  return "?";
}

std::string to_string(OptimizerType t) {
  switch (t) {
    case OptimizerType::Adam: return "Adam";
    case OptimizerType::AdamW: return "AdamW";
    case OptimizerType::SGD: return "SGD";
    case OptimizerType::Adagrad: return "Adagrad";
    case OptimizerType::Lamb: return "Lamb";
    case OptimizerType::Lion: return "Lion";
    case OptimizerType::OneBitAdam: return "OneBitAdam";
    case OptimizerType::ZeroOneAdam: return "ZeroOneAdam";
    case OptimizerType::OneBitLamb: return "OneBitLamb";
  }
  return "?";
}

std::string to_string(SchedulerType t) {
  switch (t) {
    case SchedulerType::WarmupLR: return "WarmupLR";
    case SchedulerType::WarmupDecayLR: return "WarmupDecayLR";
    case SchedulerType::WarmupCosineLR: return "WarmupCosineLR";
    case SchedulerType::OneCycle: return "OneCycle";
    case SchedulerType::LRRangeTest: return "LRRangeTest";
  }
  return "?";
}

std::string to_string(WarmupType t) { return t == WarmupType::Log ? "log" : "linear"; }

std::string to_string(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::None: return "none";
    case OffloadDevice::Cpu: return "cpu";
    case OffloadDevice::Nvme: return "nvme";
  }
  return "?";
}

std::string to_string(TagValidation v) {
  switch (v) {
    case TagValidation::Ignore: return "Ignore";
    case TagValidation::Warn: return "Warn";
    case TagValidation::Fail: return "Fail";
  }
  return "?";
}

std::string to_string(Source s) {
  switch (s) {
    case Source::File: return "file";
    case Source::Default: return "default";
    case Source::Derived: return "derived";
    case Source::Auto: return "auto";
  }
  return "?";
}

OptimizerParams default_optimizer_params(OptimizerType t) {
  OptimizerParams p;
  if (t == OptimizerType::Adagrad) {  // torch.optim.Adagrad / DeepSpeedCPUAdagrad
    p.lr = 1e-2;
    p.eps = 1e-10;
  }
  if (t == OptimizerType::Lion) p.betas = {0.9, 0.99};  // FusedLion / DeepSpeedCPULion
  return p;
}

LossScalerArgs Fp16Config::zero_dynamic_scaler_args() const {
  LossScalerArgs a;
  if (!dynamic_args_given) {
    // DynamicLossScaler's constructor defaults (reference §1.4): 2^32, window 1000, min 1, hysteresis 1.
    a.init_scale = std::ldexp(1.0, 32);
    return a;
  }
  a.init_scale = std::ldexp(1.0, static_cast<int>(initial_scale_power));
  a.scale_window = loss_scale_window;
  a.min_scale = min_loss_scale;
  a.delayed_shift = hysteresis;
  a.consecutive_hysteresis = consecutive_hysteresis;
  return a;
}

}  // namespace ds
