// The "optimizer" section (reference §9.1): type name resolution as DeepSpeed does it, per-type
// params with their constructor defaults, and DeepSpeed's rejections (max_grad_norm, AMSGrad).
#include <algorithm>
#include <array>
#include <cmath>

#include "config/parse_sections.h"
#include "util/error.h"

namespace ds::config_detail {
namespace {

constexpr const char* kAllowedOptimizers =
    "Adam, AdamW, Adagrad, Lamb, Lion, OneBitAdam, ZeroOneAdam, OneBitLamb (any case, as DeepSpeed lower-cases "
    "them) or SGD (exact case, a torch.optim name)";

OptimizerType parse_type(const Json* v, Source src) {
  const std::string path = "optimizer.type";
  if (v == nullptr) {
    throw ConfigError(path, std::string(src == Source::Auto ? "\"auto\" has no default here" : "missing") +
                                "; name the optimizer: " + kAllowedOptimizers);
  }
  if (!v->is_string()) type_error(path, std::string("an optimizer name (") + kAllowedOptimizers + ")", *v);
  const std::string name = v->get<std::string>();
  const std::string l = lower(name);
  static const std::pair<const char*, OptimizerType> kDs[] = {{"adam", OptimizerType::Adam},
                                                             {"adamw", OptimizerType::AdamW},
                                                             {"adagrad", OptimizerType::Adagrad},
                                                             {"lamb", OptimizerType::Lamb},
                                                             {"lion", OptimizerType::Lion},
                                                             {"onebitadam", OptimizerType::OneBitAdam},
                                                             {"zerooneadam", OptimizerType::ZeroOneAdam},
                                                             {"onebitlamb", OptimizerType::OneBitLamb}};
  for (const auto& [n, t] : kDs) {
    if (l == n) return t;
  }
  if (name == "SGD") return OptimizerType::SGD;
  for (const char* n : {"muadam", "muadamw", "musgd", "muon"}) {
    if (l == n) {
      throw ConfigError(path, "\"" + name + "\" is a DeepSpeed optimizer that deepspeed.cpp does not implement yet; use " +
                                  kAllowedOptimizers);
    }
  }
  for (const char* n : {"Adadelta", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam", "RMSprop", "Rprop", "SparseAdam"}) {
    if (name == n) {
      throw ConfigError(path, "\"" + name + "\" (torch.optim." + name +
                                  ") is not implemented in deepspeed.cpp yet; use " + kAllowedOptimizers);
    }
  }
  const std::string hint = l == "sgd" ? " (torch.optim names are case-sensitive: did you mean \"SGD\"?)" : "";
  throw ConfigError(path, "unknown optimizer \"" + name + "\"" + hint + "; allowed: " + kAllowedOptimizers);
}

void read_betas(SectionReader& p, std::array<double, 2>& betas) {
  Source src = p.source_of("betas");
  if (const Json* v = p.take("betas")) {
    const bool ok = v->is_array() && v->size() == 2 && (*v)[0].is_number() && (*v)[1].is_number();
    if (!ok) type_error(p.key_path("betas"), "a list of two numbers in [0, 1), e.g. [0.9, 0.999]", *v);
    for (int i = 0; i < 2; ++i) {
      const double b = (*v)[i].get<double>();
      if (!(b >= 0.0 && b < 1.0)) type_error(p.key_path("betas"), "a list of two numbers in [0, 1)", *v);
      betas[i] = b;
    }
  }
  p.ctx().record(p.key_path("betas"), Json(betas), src);
}

// The 1-bit family's own keys (DeepSpeed's OnebitAdam / ZeroOneAdam / OnebitLamb constructors).
void read_onebit_params(SectionReader& p, OptimizerType type, OptimizerParams& o) {
  using T = OptimizerType;
  p.read("bias_correction", o.bias_correction);
  p.read("eps_inside_sqrt", o.eps_inside_sqrt);
  p.read("cuda_aware", o.cuda_aware);
  if (p.read("comm_backend_name", o.comm_backend_name)) {
    static const char* kBackends[] = {"nccl", "mpi", "hccl", "compressed"};
    if (std::find(std::begin(kBackends), std::end(kBackends), o.comm_backend_name) == std::end(kBackends)) {
      throw ConfigError(p.key_path("comm_backend_name"),
                        "\"" + o.comm_backend_name + "\" is not one of DeepSpeed's 1-bit backends (nccl, mpi, hccl, "
                        "compressed); deepspeed.cpp runs the exchange over the engine's communicator either way");
    }
  }
  if (p.read("amsgrad", o.amsgrad) && o.amsgrad) {
    throw ConfigError(p.key_path("amsgrad"), "true is not supported: " + to_string(type) +
                                                 " does not support the AMSGrad variant (DeepSpeed raises the same)");
  }
  if (type == T::OneBitAdam || type == T::OneBitLamb) p.read("freeze_step", o.freeze_step, kNonNegative);
  if (type == T::ZeroOneAdam) {
    p.read("var_freeze_step", o.var_freeze_step, kNonNegative);
    p.read("var_update_scaler", o.var_update_scaler, kPositive);
    p.read("local_step_scaler", o.local_step_scaler, kPositive);
    p.read("local_step_clipper", o.local_step_clipper, kPositive);
  }
  if (type == T::OneBitLamb) {
    p.read("max_coeff", o.max_coeff, kNonNegativeReal);
    p.read("min_coeff", o.min_coeff, kNonNegativeReal);
    p.read("coeff_beta", o.coeff_beta, kUnitInterval);
    p.read("factor_max", o.factor_max, kNonNegativeReal);
    p.read("factor_min", o.factor_min, kNonNegativeReal);
    p.read("factor_threshold", o.factor_threshold, kNonNegativeReal);
    if (o.min_coeff > o.max_coeff)
      throw ConfigError(p.key_path("min_coeff"), "min_coeff " + Json(o.min_coeff).dump() + " exceeds max_coeff " +
                                                     Json(o.max_coeff).dump());
    if (o.factor_min > o.factor_max)
      throw ConfigError(p.key_path("factor_min"), "factor_min " + Json(o.factor_min).dump() + " exceeds factor_max " +
                                                      Json(o.factor_max).dump());
  }
}

void read_params(SectionReader& p, OptimizerType type, OptimizerParams& o) {
  using T = OptimizerType;
  if (is_onebit(type)) {
    p.read("lr", o.lr, kNonNegativeReal);
    p.read("weight_decay", o.weight_decay, kNonNegativeReal);
    read_betas(p, o.betas);
    p.read("eps", o.eps, kNonNegativeReal);
    read_onebit_params(p, type, o);
    return;
  }
  const bool adam = type == T::Adam || type == T::AdamW, lamb = type == T::Lamb;
  p.read("lr", o.lr, kNonNegativeReal);
  p.read("weight_decay", o.weight_decay, kNonNegativeReal);
  if (adam || lamb || type == T::Lion) read_betas(p, o.betas);
  if (adam || lamb || type == T::Adagrad) p.read("eps", o.eps, kNonNegativeReal);
  if (adam || lamb) {
    p.read("bias_correction", o.bias_correction);
    if (p.read("amsgrad", o.amsgrad) && o.amsgrad) {
      throw ConfigError(p.key_path("amsgrad"), "true is not supported (DeepSpeed's fused Adam and Lamb reject the "
                                               "AMSGrad variant too); remove it or set it to false");
    }
  }
  if (adam) {
    p.read("adam_w_mode", o.adam_w_mode);
    if (p.read("torch_adam", o.torch_adam) && o.torch_adam)
      warn_no_effect(p.ctx(), p.key_path("torch_adam"), "true",
                     "Adam and AdamW run deepspeed.cpp's kernels (DeepSpeed's fused / CPU-Adam arithmetic, which "
                     "torch.optim's differs from in rounding only); unlike DeepSpeed's torch AdamW, weight_decay stays "
                     "0 unless given");
  }
  if (lamb) {
    p.read("max_coeff", o.max_coeff, kNonNegativeReal);
    p.read("min_coeff", o.min_coeff, kNonNegativeReal);
    p.read("eps_inside_sqrt", o.eps_inside_sqrt);
    if (o.min_coeff > o.max_coeff) {
      throw ConfigError(p.key_path("min_coeff"), "min_coeff " + Json(o.min_coeff).dump() + " exceeds max_coeff " +
                                                     Json(o.max_coeff).dump());
    }
  }
  if (type == T::Adagrad) {
    p.read("lr_decay", o.lr_decay, kNonNegativeReal);
    p.read("initial_accumulator_value", o.initial_accumulator_value, kNonNegativeReal);
  }
  if (type == T::SGD) {
    p.read("momentum", o.momentum, kNonNegativeReal);
    p.read("dampening", o.dampening);
    p.read("nesterov", o.nesterov);
    if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0)) {
      throw ConfigError(p.key_path("nesterov"), "Nesterov momentum requires a momentum and zero dampening (got momentum " +
                                                    Json(o.momentum).dump() + ", dampening " +
                                                    Json(o.dampening).dump() + ")");
    }
  }
}

}  // namespace

void parse_optimizer(SectionReader& top, Config& cfg) {
  SectionReader sec(top.ctx(), top.raw("optimizer"), "optimizer", UnknownKeys::Warn);
  if (!sec.present()) {
    top.ctx().record("optimizer", nullptr, sec.section_source());
    return;
  }
  OptimizerConfig oc;
  const Source type_src = sec.source_of("type");
  oc.type = parse_type(sec.take("type"), type_src);
  top.ctx().record("optimizer.type", to_string(oc.type), Source::File);
  oc.params = default_optimizer_params(oc.type);
  if (sec.read("legacy_fusion", oc.legacy_fusion) && oc.legacy_fusion) {
    warn_unsupported(top.ctx(), "optimizer.legacy_fusion");
  }

  SectionReader p(top.ctx(), sec.raw("params"), "optimizer.params", UnknownKeys::Error);
  if (p.given("max_grad_norm")) {
    throw ConfigError("optimizer.params.max_grad_norm",
                      "'max_grad_norm' is not supported as an optimizer parameter, please switch to using the "
                      "deepspeed parameter 'gradient_clipping' see: "
                      "https://www.deepspeed.ai/docs/config-json/#gradient-clipping for more details");
  }
  p.object().erase("max_grad_norm");  // here it is absent or "auto", i.e. absent
  read_params(p, oc.type, oc.params);
  p.finish("not a parameter of the " + to_string(oc.type) +
           " optimizer (DeepSpeed passes params to its constructor, which rejects unknown ones)");
  sec.finish();
  cfg.optimizer = oc;
}

}  // namespace ds::config_detail
