// Deprecated and alternative key names, the legacy boolean ZeRO form, and the "auto" rule
// ("auto" = as if the key were absent: derived for the batch triple, default elsewhere).
#include <gtest/gtest.h>

#include "config_test_util.h"

namespace ds {
namespace {

std::string with_batch(const std::string& rest) { return R"({"train_batch_size": 8, )" + rest + "}"; }

TEST(Aliases, CpuOffloadBecomesOffloadOptimizer) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 2, "cpu_offload": true})"));
  EXPECT_EQ(c.zero_optimization.offload_optimizer.device, OffloadDevice::Cpu);
  EXPECT_TRUE(test::has_warning(c, "zero_optimization.cpu_offload: deprecated, use \"offload_optimizer\""));
  EXPECT_EQ(test::source_of(c, "zero_optimization.offload_optimizer.device"), "file");
  const Config off = test::load(with_batch(R"("zero_optimization": {"stage": 2, "cpu_offload": false})"));
  EXPECT_EQ(off.zero_optimization.offload_optimizer.device, OffloadDevice::None);
  EXPECT_CONFIG_ERROR(with_batch(R"("zero_optimization": {"stage": 2, "cpu_offload": true,
                                    "offload_optimizer": {"device": "cpu"}})"),
                      "zero_optimization.cpu_offload: Cannot provide deprecated parameter 'cpu_offload' and replacing "
                      "parameter 'offload_optimizer' together");
}

TEST(Aliases, CpuOffloadParamAndPinMemory) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 3, "cpu_offload_param": true,
                                              "cpu_offload_use_pin_memory": true})"));
  EXPECT_EQ(c.zero_optimization.offload_param.device, OffloadDevice::Cpu);
  EXPECT_FALSE(c.zero_optimization.offload_param.pin_memory);  // DeepSpeed only warns about it
  EXPECT_TRUE(test::has_warning(c, "zero_optimization.cpu_offload_param: deprecated"));
  EXPECT_TRUE(test::has_warning(c, "zero_optimization.cpu_offload_use_pin_memory: deprecated and ignored"));
}

TEST(Aliases, Stage3NamesAreAcceptedQuietly) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e6,
      "stage3_param_persistence_threshold": 1e4, "stage3_max_live_parameters": 3e8, "stage3_max_reuse_distance": 2e8,
      "stage3_gather_16bit_weights_on_model_save": true, "stage3_model_persistence_threshold": 1000})"));
  const ZeroConfig& z = c.zero_optimization;
  EXPECT_EQ(z.prefetch_bucket_size, 5000000);
  EXPECT_EQ(z.param_persistence_threshold, 10000);
  EXPECT_EQ(z.max_live_parameters, 300000000);
  EXPECT_EQ(z.max_reuse_distance, 200000000);
  EXPECT_TRUE(z.gather_16bit_weights_on_model_save);
  EXPECT_EQ(z.model_persistence_threshold, 1000);
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(test::source_of(c, "zero_optimization.prefetch_bucket_size"), "file");
  EXPECT_CONFIG_ERROR(with_batch(R"("zero_optimization": {"prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 2})"),
                      "zero_optimization.stage3_prefetch_bucket_size: given together with \"prefetch_bucket_size\"");
}

TEST(Aliases, Fp16GatherNameIsDeprecated) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 3,
      "stage3_gather_fp16_weights_on_model_save": true})"));
  EXPECT_TRUE(c.zero_optimization.gather_16bit_weights_on_model_save);
  EXPECT_TRUE(test::has_warning(c, "zero_optimization.stage3_gather_fp16_weights_on_model_save: deprecated, use "
                                   "\"gather_16bit_weights_on_model_save\""));
}

TEST(Aliases, LegacyBooleanZero) {
  const Config on = test::load(with_batch(R"("zero_optimization": true, "allgather_size": 2e8)"));
  EXPECT_EQ(on.zero_optimization.stage, 1);
  EXPECT_EQ(on.zero_optimization.allgather_bucket_size, 200000000);
  EXPECT_TRUE(test::has_warning(on, "zero_optimization: the boolean form is deprecated"));
  const Config on_default = test::load(with_batch(R"("zero_optimization": true)"));
  EXPECT_EQ(on_default.zero_optimization.allgather_bucket_size, 500000000);
  const Config off = test::load(with_batch(R"("zero_optimization": false)"));
  EXPECT_EQ(off.zero_optimization.stage, 0);
}

TEST(Aliases, AioThreadCount) {
  const Config c = test::load(with_batch(R"("aio": {"thread_count": 4})"));
  EXPECT_EQ(c.aio.intra_op_parallelism, 4);
  EXPECT_TRUE(test::has_warning(c, "aio.thread_count: deprecated"));
  EXPECT_TRUE(test::has_warning(c, "DeepSpeed itself now ignores thread_count"));
  const Config both = test::load(with_batch(R"("aio": {"thread_count": 4, "intra_op_parallelism": 2})"));
  EXPECT_EQ(both.aio.intra_op_parallelism, 2);
  EXPECT_TRUE(test::has_warning(both, "aio.thread_count: deprecated and ignored"));
}

TEST(Aliases, Bfloat16SectionName) {
  const Config c = test::load(with_batch(R"("bfloat16": {"enabled": true})"));
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_TRUE(test::has_warning(c, "bfloat16: deprecated, use \"bf16\""));
  EXPECT_CONFIG_ERROR(with_batch(R"("bfloat16": {"enabled": true}, "bf16": {"enabled": true})"),
                      "bfloat16: given together with \"bf16\"");
}

TEST(Auto, BatchKeysAreDerived) {
  const Config c = test::load(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4,
                                  "gradient_accumulation_steps": "auto"})", 2);
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_EQ(c.gradient_accumulation_steps, 1);
  EXPECT_EQ(test::source_of(c, "train_batch_size"), "auto");
  EXPECT_EQ(test::source_of(c, "gradient_accumulation_steps"), "auto");
  EXPECT_EQ(test::source_of(c, "train_micro_batch_size_per_gpu"), "file");
  // Hugging Face's Trainer fills the micro batch; without it the message says so.
  EXPECT_EQ(test::load_error(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"})"),
            "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided (train_batch_size, "
            "train_micro_batch_size_per_gpu \"auto\": Hugging Face's Trainer fills these in; without it, give "
            "train_micro_batch_size_per_gpu and gradient_accumulation_steps)");
  EXPECT_TRUE(c.warnings.empty());  // the derived batch keys need no warning
}

TEST(Auto, OtherKeysTakeTheirDefault) {
  const Config c = test::load(with_batch(R"("gradient_clipping": "auto", "fp16": {"enabled": "auto",
      "loss_scale_window": "auto"}, "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto",
      "weight_decay": 0.1}}, "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto", "overlap_comm": "auto"}, "steps_per_print": "auto")"));
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.fp16.dynamic_args_given);  // an "auto" scaler key was not given
  EXPECT_DOUBLE_EQ(c.optimizer->params.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.optimizer->params.betas[1], 0.999);
  EXPECT_DOUBLE_EQ(c.optimizer->params.weight_decay, 0.1);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero_optimization.prefetch_bucket_size, 50000000);
  EXPECT_TRUE(c.zero_optimization.overlap_comm);  // derived from stage 3
  EXPECT_FALSE(c.steps_per_print.has_value());
  for (const char* path : {"gradient_clipping", "fp16.enabled", "fp16.loss_scale_window", "optimizer.params.lr",
                           "optimizer.params.betas", "zero_optimization.reduce_bucket_size",
                           "zero_optimization.prefetch_bucket_size", "zero_optimization.overlap_comm",
                           "steps_per_print"}) {
    EXPECT_EQ(test::source_of(c, path), "auto") << path;
  }
  EXPECT_EQ(test::source_of(c, "optimizer.params.weight_decay"), "file");
  EXPECT_EQ(test::source_of(c, "fp16.hysteresis"), "default");
  // One warning names each defaulted "auto" with its value (overlap_comm is derived: not listed).
  ASSERT_EQ(c.warnings.size(), 1u);
  const std::string& w = c.warnings.front();
  for (const char* item : {"gradient_clipping = 1.0", "fp16.enabled = false", "fp16.loss_scale_window = 1000",
                           "optimizer.params.lr = 0.001", "optimizer.params.betas = [0.9,0.999]",
                           "zero_optimization.reduce_bucket_size = 500000000",
                           "zero_optimization.prefetch_bucket_size = 50000000", "steps_per_print = null"}) {
    EXPECT_NE(w.find(item), std::string::npos) << item << " not in: " << w;
  }
  EXPECT_EQ(w.find("overlap_comm"), std::string::npos) << w;
  EXPECT_NE(w.find("Hugging Face's Trainer"), std::string::npos) << w;
  EXPECT_NE(w.find("Set each to the value you want to silence this warning"), std::string::npos) << w;
}

TEST(Auto, WholeSectionAndRequiredKeys) {
  const Config c = test::load(with_batch(R"("fp16": "auto")"));
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_EQ(test::source_of(c, "fp16.enabled"), "auto");
  EXPECT_TRUE(test::has_warning(c, "fp16 = every key at its default")) << c.warnings.size();
  EXPECT_CONFIG_ERROR(with_batch(R"("optimizer": {"type": "auto"})"),
                      "optimizer.type: \"auto\" has no default here");
  EXPECT_CONFIG_ERROR(with_batch(R"("optimizer": {"type": "Adam"}, "scheduler": {"type": "WarmupDecayLR",
                                    "params": {"total_num_steps": "auto"}})"),
                      "scheduler.params.total_num_steps: \"auto\" has no default (Hugging Face's Trainer fills it in");
  // "auto" for max_grad_norm means absent: no error.
  EXPECT_NO_THROW(test::load(with_batch(R"("optimizer": {"type": "Adam", "params": {"max_grad_norm": "auto"}})")));
}

// Where Hugging Face's integration gives "auto" a meaning that needs no Trainer, it is used silently:
// the batch triple (micro x GAS x world), WarmupLR's warmup_min_lr 0 and warmup_max_lr = the lr.
TEST(Auto, HuggingFaceMeaningsWithoutTheTrainer) {
  const Config c = test::load(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 2,
      "gradient_accumulation_steps": 3, "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                   "warmup_num_steps": 10}}})", 2);
  EXPECT_EQ(c.train_batch_size, 12);
  EXPECT_DOUBLE_EQ(c.scheduler->params.warmup_max_lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.scheduler->params.warmup_min_lr, 0.0);
  EXPECT_EQ(test::source_of(c, "scheduler.params.warmup_max_lr"), "auto");
  EXPECT_EQ(test::value_of(c, "scheduler.params.warmup_max_lr"), "0.0003");
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
}

// The all-"auto" config of Hugging Face's DeepSpeed guide (micro batch given, as the Trainer would).
TEST(Auto, HuggingFaceTemplateWarnsOnceWithTheValuesUsed) {
  const Config c = test::load(R"({
    "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                 "warmup_num_steps": "auto"}},
    "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto", "allgather_bucket_size": 2e8},
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": 4})", 2);
  ASSERT_EQ(c.warnings.size(), 1u);
  const std::string& w = c.warnings.front();
  for (const char* item : {"fp16.enabled = false", "optimizer.params.lr = 0.001", "optimizer.params.eps = 1e-08",
                           "optimizer.params.weight_decay = 0.0", "scheduler.params.warmup_num_steps = 1000",
                           "gradient_clipping = 1.0", "zero_optimization.reduce_bucket_size = 500000000"}) {
    EXPECT_NE(w.find(item), std::string::npos) << item << " not in: " << w;
  }
  for (const char* quiet : {"train_batch_size", "gradient_accumulation_steps", "warmup_max_lr", "warmup_min_lr"}) {
    EXPECT_EQ(w.find(quiet), std::string::npos) << quiet << " in: " << w;
  }
  EXPECT_DOUBLE_EQ(c.scheduler->params.warmup_max_lr, 1e-3);  // follows the (defaulted) lr
  EXPECT_EQ(c.train_batch_size, 8);
}

}  // namespace
}  // namespace ds
