// "optimizer" and "scheduler": type names as DeepSpeed resolves them (§9.1), per-type params and
// defaults, and the rejections DeepSpeed makes (max_grad_norm, unknown params, untested ZeRO optimizer).
#include <gtest/gtest.h>

#include "config_test_util.h"

namespace ds {
namespace {

Config with_optimizer(const std::string& opt) { return test::load(R"({"train_batch_size": 8, "optimizer": )" + opt + "}"); }
std::string optimizer_error(const std::string& opt) {
  return test::load_error(R"({"train_batch_size": 8, "optimizer": )" + opt + "}");
}
// An LR schedule needs an optimizer (the engine has no client optimizers), so one comes along.
Config with_scheduler(const std::string& s) {
  return test::load(R"({"train_batch_size": 8, "optimizer": {"type": "Adam"}, "scheduler": )" + s + "}");
}
std::string scheduler_error(const std::string& s) {
  return test::load_error(R"({"train_batch_size": 8, "scheduler": )" + s + "}");
}

TEST(Optimizer, DeepSpeedNamesAreCaseInsensitiveTorchNamesAreNot) {
  EXPECT_EQ(with_optimizer(R"({"type": "Adam"})").optimizer->type, OptimizerType::Adam);
  EXPECT_EQ(with_optimizer(R"({"type": "ADAMW"})").optimizer->type, OptimizerType::AdamW);
  EXPECT_EQ(with_optimizer(R"({"type": "adagrad"})").optimizer->type, OptimizerType::Adagrad);
  EXPECT_EQ(with_optimizer(R"({"type": "LAMB"})").optimizer->type, OptimizerType::Lamb);
  EXPECT_EQ(with_optimizer(R"({"type": "Lion"})").optimizer->type, OptimizerType::Lion);
  EXPECT_EQ(with_optimizer(R"({"type": "SGD"})").optimizer->type, OptimizerType::SGD);
  EXPECT_EQ(optimizer_error(R"({"type": "sgd"})"),
            "optimizer.type: unknown optimizer \"sgd\" (torch.optim names are case-sensitive: did you mean \"SGD\"?); "
            "allowed: Adam, AdamW, Adagrad, Lamb, Lion, OneBitAdam, ZeroOneAdam, OneBitLamb (any case, as DeepSpeed "
            "lower-cases them) or SGD (exact case, a torch.optim name)");
}

TEST(Optimizer, UnimplementedAndUnknownTypes) {
  for (const char* t : {"MuAdam", "MuAdamW", "MuSGD"}) {
    EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": ")" + std::string(t) + "\"}}",
                        "optimizer.type: \"" + std::string(t) + "\" is a DeepSpeed optimizer that deepspeed.cpp does "
                        "not implement yet");
  }
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "RMSprop"}})",
                      "optimizer.type: \"RMSprop\" (torch.optim.RMSprop) is not implemented in deepspeed.cpp yet");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "Adamm"}})",
                      "optimizer.type: unknown optimizer \"Adamm\"; allowed: Adam, AdamW");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"params": {"lr": 0.1}}})", "optimizer.type: missing");
}

TEST(Optimizer, OneBitFamilyParamsDefaultsAndRefusals) {
  EXPECT_EQ(with_optimizer(R"({"type": "OnebitAdam"})").optimizer->type, OptimizerType::OneBitAdam);
  const Config a = with_optimizer(R"({"type": "OneBitAdam", "params": {"lr": 4e-4, "freeze_step": 23000,
      "cuda_aware": false, "comm_backend_name": "nccl", "bias_correction": false, "weight_decay": 0.01}})");
  EXPECT_EQ(a.optimizer->params.freeze_step, 23000);
  EXPECT_DOUBLE_EQ(a.optimizer->params.weight_decay, 0.01);
  const Config z = with_optimizer(R"({"type": "ZeroOneAdam", "params": {"var_freeze_step": 1000,
      "var_update_scaler": 8, "local_step_scaler": 100, "local_step_clipper": 4}})");
  EXPECT_EQ(z.optimizer->params.var_freeze_step, 1000);
  EXPECT_EQ(z.optimizer->params.var_update_scaler, 8);
  EXPECT_EQ(z.optimizer->params.local_step_scaler, 100);
  EXPECT_EQ(z.optimizer->params.local_step_clipper, 4);
  const Config l = with_optimizer(R"({"type": "onebitlamb", "params": {"max_coeff": 0.3, "min_coeff": 0.01,
      "coeff_beta": 0.9, "factor_max": 4.0, "factor_min": 0.5, "factor_threshold": 0.1, "freeze_step": 10}})");
  EXPECT_DOUBLE_EQ(l.optimizer->params.max_coeff, 0.3);
  EXPECT_DOUBLE_EQ(l.optimizer->params.factor_min, 0.5);
  const Config d = with_optimizer(R"({"type": "ZeroOneAdam"})");  // DeepSpeed's constructor defaults
  EXPECT_EQ(d.optimizer->params.var_freeze_step, 100000);
  EXPECT_EQ(d.optimizer->params.var_update_scaler, 16);
  EXPECT_EQ(d.optimizer->params.local_step_scaler, 32678);
  EXPECT_EQ(d.optimizer->params.local_step_clipper, 16);
  EXPECT_EQ(d.optimizer->params.freeze_step, 100000);
  EXPECT_TRUE(test::has_warning(d, "Currently the convergence of 0/1 Adam is only verified under FP16"));
  // Keys of another member of the family are named, as DeepSpeed's constructor would reject them.
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "OneBitAdam", "params": {"var_freeze_step": 5}}})",
                      "optimizer.params.var_freeze_step", "OneBitAdam");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "OneBitAdam", "params": {"amsgrad": true}}})",
                      "optimizer.params.amsgrad", "AMSGrad");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "OneBitAdam", "params": {"comm_backend_name": "gloo"}}})",
                      "optimizer.params.comm_backend_name", "\"gloo\"");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "OneBitLamb", "params": {"factor_min": 5}}})",
                      "optimizer.params.factor_min", "exceeds factor_max");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "zero_optimization": {"stage": 1}, "optimizer": {"type": "OneBitAdam"}})",
                      "zero_optimization.stage: 1", "1-bit Adam is not compatible with ZeRO");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2}, "optimizer": {"type": "ZeroOneAdam"}})",
                      "0/1 Adam is not compatible with ZeRO");
  const Config w = test::load(R"({"train_batch_size": 8, "fp16": {"enabled": true}, "optimizer": {"type": "OneBitAdam",
      "params": {"freeze_step": 500}}, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 400}}})");
  EXPECT_TRUE(test::has_warning(w, "optimizer.params.freeze_step: 500 is not below the schedule's total_num_steps 400"));
  EXPECT_FALSE(test::has_warning(w, "only verified under FP16"));
}

TEST(Optimizer, AdamParamsAndDecoupledWeightDecay) {
  const Config c = with_optimizer(R"({"type": "Adam", "params": {"lr": 3e-4, "betas": [0.8, 0.99], "eps": 1e-6,
                                       "weight_decay": 0.01}})");
  const OptimizerConfig& o = *c.optimizer;
  EXPECT_DOUBLE_EQ(o.params.lr, 3e-4);
  EXPECT_DOUBLE_EQ(o.params.betas[0], 0.8);
  EXPECT_DOUBLE_EQ(o.params.betas[1], 0.99);
  EXPECT_DOUBLE_EQ(o.params.eps, 1e-6);
  EXPECT_DOUBLE_EQ(o.params.weight_decay, 0.01);
  EXPECT_TRUE(o.params.adam_w_mode);
  EXPECT_FALSE(o.params.torch_adam);
  EXPECT_TRUE(o.params.bias_correction);
  EXPECT_TRUE(o.decoupled_weight_decay());  // "Adam" with the default adam_w_mode is AdamW
  EXPECT_FALSE(with_optimizer(R"({"type": "Adam", "params": {"adam_w_mode": false}})").optimizer->decoupled_weight_decay());
  EXPECT_TRUE(with_optimizer(R"({"type": "AdamW", "params": {"adam_w_mode": false}})").optimizer->decoupled_weight_decay());
  EXPECT_EQ(test::value_of(c, "optimizer.params.betas"), "[0.8,0.99]");
  EXPECT_EQ(test::source_of(c, "optimizer.params.adam_w_mode"), "default");
  EXPECT_EQ(test::value_of(c, "optimizer.type"), "\"Adam\"");
}

TEST(Optimizer, PerTypeDefaults) {
  const Config adam = with_optimizer(R"({"type": "AdamW"})");
  EXPECT_DOUBLE_EQ(adam.optimizer->params.lr, 1e-3);
  EXPECT_DOUBLE_EQ(adam.optimizer->params.eps, 1e-8);
  EXPECT_DOUBLE_EQ(adam.optimizer->params.betas[1], 0.999);
  const Config adagrad = with_optimizer(R"({"type": "Adagrad"})");
  EXPECT_DOUBLE_EQ(adagrad.optimizer->params.lr, 1e-2);
  EXPECT_DOUBLE_EQ(adagrad.optimizer->params.eps, 1e-10);
  EXPECT_DOUBLE_EQ(adagrad.optimizer->params.lr_decay, 0.0);
  const Config lion = with_optimizer(R"({"type": "Lion"})");
  EXPECT_DOUBLE_EQ(lion.optimizer->params.betas[1], 0.99);
  const Config lamb = with_optimizer(R"({"type": "Lamb", "params": {"max_coeff": 0.3, "min_coeff": 0.01}})");
  EXPECT_DOUBLE_EQ(lamb.optimizer->params.max_coeff, 0.3);
  const Config sgd = with_optimizer(R"({"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "nesterov": true}})");
  EXPECT_DOUBLE_EQ(sgd.optimizer->params.momentum, 0.9);
  EXPECT_TRUE(sgd.optimizer->params.nesterov);
  // Only the type's own keys are reported.
  EXPECT_EQ(test::value_of(sgd, "optimizer.params.betas"), "<missing>");
  EXPECT_EQ(test::value_of(sgd, "optimizer.params.dampening"), "0.0");
}

TEST(Optimizer, Rejections) {
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"max_grad_norm": 1.0}}})",
                      "optimizer.params.max_grad_norm: 'max_grad_norm' is not supported as an optimizer parameter, "
                      "please switch to using the deepspeed parameter 'gradient_clipping'");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"momentum": 0.9}}})",
                      "optimizer.params.momentum: unknown key; not a parameter of the Adam optimizer",
                      "allowed keys: adam_w_mode, amsgrad, betas");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"amsgrad": true}}})",
                      "optimizer.params.amsgrad: true is not supported");
  EXPECT_EQ(optimizer_error(R"({"type": "Adam", "params": {"betas": [0.9]}})"),
            "optimizer.params.betas: expected a list of two numbers in [0, 1), e.g. [0.9, 0.999], got [0.9]");
  EXPECT_EQ(optimizer_error(R"({"type": "Adam", "params": {"lr": -1}})"),
            "optimizer.params.lr: expected a number >= 0.0, got -1");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"nesterov": true}}})",
                      "optimizer.params.nesterov: Nesterov momentum requires a momentum and zero dampening");
}

TEST(Optimizer, LambNeedsDynamicLossScaleUnderFp16) {
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "optimizer": {"type": "Lamb"}, "fp16": {"enabled": true,
                          "loss_scale": 128}})",
                      "fp16.loss_scale: 128.0: the Lamb optimizer requires dynamic loss scaling");
}

TEST(Optimizer, UntestedZeroOptimizerNeedsOptIn) {
  const std::string base = R"({"train_batch_size": 8, "zero_optimization": {"stage": 1}, "optimizer": {"type": "SGD"})";
  EXPECT_CONFIG_ERROR(base + "}", "optimizer.type: \"SGD\" with ZeRO: You are using an untested ZeRO Optimizer");
  EXPECT_NO_THROW(test::load(base + R"(, "zero_allow_untested_optimizer": true})"));
  EXPECT_NO_THROW(test::load(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2}, "optimizer": {"type": "Adam"}})"));
}

TEST(Scheduler, TypesAndDefaults) {
  const Config c = with_scheduler(R"({"type": "WarmupLR", "params": {"warmup_num_steps": 10}})");
  ASSERT_TRUE(c.scheduler.has_value());
  EXPECT_EQ(c.scheduler->type, SchedulerType::WarmupLR);
  EXPECT_EQ(c.scheduler->params.warmup_num_steps, 10);
  EXPECT_DOUBLE_EQ(c.scheduler->params.warmup_min_lr, 0.0);
  EXPECT_DOUBLE_EQ(c.scheduler->params.warmup_max_lr, 0.001);
  EXPECT_EQ(c.scheduler->params.warmup_type, WarmupType::Log);
  EXPECT_EQ(c.scheduler->params.last_batch_iteration, -1);
  EXPECT_EQ(test::value_of(c, "scheduler.params.warmup_type"), "\"log\"");

  const Config cos = with_scheduler(R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 100,
                                         "warmup_type": "linear"}})");
  EXPECT_EQ(cos.scheduler->params.total_num_steps, 100);
  EXPECT_DOUBLE_EQ(cos.scheduler->params.cos_min_ratio, 1e-4);
  EXPECT_EQ(cos.scheduler->params.warmup_type, WarmupType::Linear);

  const Config oc = with_scheduler(R"({"type": "OneCycle", "params": {"cycle_min_lr": 0.01, "cycle_max_lr": 0.1}})");
  EXPECT_EQ(oc.scheduler->params.cycle_first_step_size, 2000);
  EXPECT_FALSE(oc.scheduler->params.cycle_second_step_size.has_value());
  EXPECT_DOUBLE_EQ(oc.scheduler->params.cycle_min_mom, 0.8);
  EXPECT_DOUBLE_EQ(oc.scheduler->params.cycle_max_mom, 0.9);
  EXPECT_TRUE(oc.scheduler->params.cycle_momentum);

  const Config rt = with_scheduler(R"({"type": "LRRangeTest"})");
  EXPECT_DOUBLE_EQ(rt.scheduler->params.lr_range_test_min_lr, 1e-3);
  EXPECT_EQ(rt.scheduler->params.lr_range_test_step_size, 2000);
  EXPECT_FALSE(rt.scheduler->params.lr_range_test_staircase);
}

TEST(Scheduler, Errors) {
  EXPECT_EQ(scheduler_error(R"({"type": "Cosine"})"),
            "scheduler.type: unknown schedule \"Cosine\"; allowed: WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, "
            "LRRangeTest (exact case)");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "scheduler": {"type": "StepLR"}})",
                      "scheduler.type: \"StepLR\" (torch.optim.lr_scheduler.StepLR) is not implemented");
  EXPECT_EQ(scheduler_error(R"({"type": "WarmupDecayLR", "params": {}})"),
            "scheduler.params.total_num_steps: missing; WarmupDecayLR requires it (DeepSpeed's constructor has no "
            "default)");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "scheduler": {"type": "OneCycle", "params": {"cycle_max_lr": 1}}})",
                      "scheduler.params.cycle_min_lr: missing; OneCycle requires it");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "scheduler": {"type": "WarmupLR", "params": {"total_num_steps": 5}}})",
                      "scheduler.params.total_num_steps: unknown key (did you mean \"warmup_num_steps\"?); not a parameter of "
                      "the WarmupLR schedule");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": [1, 2]}}})",
                      "scheduler.params.warmup_max_lr: per-parameter-group lists are not supported");
}

TEST(Scheduler, NeedsAnOptimizer) {
  // The engine refuses a schedule without an optimizer at start; so does the loader (ds-report).
  EXPECT_EQ(scheduler_error(R"({"type": "WarmupLR"})"),
            "scheduler: an LR schedule needs an optimizer; add an \"optimizer\" section");
}

TEST(Scheduler, WarningsDeepSpeedGives) {
  const Config c = with_scheduler(R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 10,
                                        "warmup_num_steps": 20, "warmup_type": "cubic"}})");
  EXPECT_TRUE(test::has_warning(c, "scheduler.params.total_num_steps: total_num_steps 10 is less than warmup_num_steps 20"));
  EXPECT_TRUE(test::has_warning(c, "scheduler.params.warmup_type: unknown value \"cubic\"; using \"log\""));
  EXPECT_EQ(c.scheduler->params.warmup_type, WarmupType::Log);
}

}  // namespace
}  // namespace ds
