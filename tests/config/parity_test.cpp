// Config parity with DeepSpeed 0.19.x (issue 14 item 5): the defaults that moved, the data-parallel
// world that sequence/tensor/pipeline sizes leave for the batch triple, hjson syntax, keys DeepSpeed
// ignores, the batch errors' arithmetic and the semantics line of the report. Messages exact.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/batch_config.h"
#include "config/json_parse.h"
#include "config_test_util.h"

namespace ds {
namespace {

using std::nullopt;

std::string with_batch(const std::string& rest) { return R"({"train_batch_size": 8, )" + rest + "}"; }

// --- defaults that moved (docs/config-defaults.md) ---

TEST(Parity, GradientClippingDefaultsToOneAndZeroStillTurnsItOff) {
  const Config c = test::load(R"({"train_batch_size": 8})");
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(test::value_of(c, "gradient_clipping"), "1.0");
  EXPECT_EQ(test::source_of(c, "gradient_clipping"), "default");
  EXPECT_EQ(test::load(with_batch(R"("gradient_clipping": 0.0)")).gradient_clipping, 0.0);
}

TEST(Parity, Bf16CheckGradOverflowDefaultsOnAndOldNameIsAnAlias) {
  const Config c = test::load(with_batch(R"("bf16": {"enabled": true})"));
  EXPECT_TRUE(c.bf16.check_grad_overflow);
  EXPECT_EQ(test::source_of(c, "bf16.check_grad_overflow"), "default");
  EXPECT_TRUE(c.warnings.empty());

  const Config old = test::load(with_batch(R"("bf16": {"enabled": true, "check_overflow": true})"));
  EXPECT_TRUE(old.bf16.check_grad_overflow);
  ASSERT_EQ(old.warnings.size(), 1u);
  EXPECT_EQ(old.warnings.front(),
            "bf16.check_overflow: deprecated, use \"check_grad_overflow\" (value taken as bf16.check_grad_overflow)");

  const Config off = test::load(with_batch(R"("bf16": {"enabled": true, "check_grad_overflow": false})"));
  EXPECT_FALSE(off.bf16.check_grad_overflow);
  ASSERT_EQ(off.warnings.size(), 1u);
  EXPECT_EQ(off.warnings.front(),
            "bf16.check_grad_overflow: false is not honoured: nan_guard (on by default) still skips a bf16 step whose "
            "gradients are not finite, and stops after nan_guard.max_consecutive_steps such steps; set "
            "nan_guard.enabled false to apply them");
  EXPECT_CONFIG_ERROR(with_batch(R"("bf16": {"check_overflow": true, "check_grad_overflow": true})"),
                      "bf16.check_overflow: given together with \"check_grad_overflow\"");
}

TEST(Parity, WarmupLRWarmsUpToTheOptimizersLrWhenMaxIsAbsent) {
  const Config c = test::load(with_batch(R"("optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}})"));
  EXPECT_DOUBLE_EQ(c.scheduler->params.warmup_max_lr, 3e-4);
  EXPECT_EQ(test::source_of(c, "scheduler.params.warmup_max_lr"), "derived");
  EXPECT_EQ(test::value_of(c, "scheduler.params.warmup_max_lr"), "0.0003");
  // Given: used as is. WarmupDecayLR keeps its own default, 0.001 (DeepSpeed passes it explicitly).
  EXPECT_DOUBLE_EQ(test::load(with_batch(R"("optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.01}})"))
                       .scheduler->params.warmup_max_lr,
                   0.01);
  const Config decay = test::load(with_batch(R"("optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
      "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 100}})"));
  EXPECT_DOUBLE_EQ(decay.scheduler->params.warmup_max_lr, 0.001);
  EXPECT_EQ(test::source_of(decay, "scheduler.params.warmup_max_lr"), "default");
}

TEST(Parity, WarmupNumStepsMustBePositive) {
  EXPECT_EQ(test::load_error(with_batch(R"("optimizer": {"type": "AdamW"},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0}})")),
            "scheduler.params.warmup_num_steps: warmup_num_steps must be a positive integer, got 0 (as DeepSpeed's "
            "WarmupLR)");
  EXPECT_EQ(test::load_error(with_batch(R"("optimizer": {"type": "AdamW"},
      "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 10, "warmup_num_steps": -3}})")),
            "scheduler.params.warmup_num_steps: warmup_num_steps must be a positive integer, got -3 (as DeepSpeed's "
            "WarmupCosineLR)");
}

// Checked against DeepSpeed's offload_config.py: pin_memory did not move (still false).
TEST(Parity, OffloadPinMemoryStaysFalse) {
  const Config c = test::load(with_batch(R"("zero_optimization": {"stage": 3,
      "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}})"));
  EXPECT_FALSE(c.zero_optimization.offload_param.pin_memory);
  EXPECT_FALSE(c.zero_optimization.offload_optimizer.pin_memory);
}

// Keys DeepSpeed 0.19 added: known by name (not "unknown key"), their defaults are ours.
TEST(Parity, NewerTopLevelKeysAreKnown) {
  const Config c = test::load(with_batch(R"("managed_gradient_accumulation": true, "gradient_allreduce_op": "MEAN",
      "disable_python_gc": true, "data_types": {"param_dtype": null, "buffer_dtype": null})"));
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  EXPECT_EQ(test::value_of(c, "gradient_allreduce_op"), "\"mean\"");
  const Config w = test::load(with_batch(R"("managed_gradient_accumulation": false, "log_level": "debug",
      "expert_parallel": {"enabled": true}, "data_types": {"param_dtype": "bf16"})"));
  ASSERT_EQ(w.warnings.size(), 4u);
  EXPECT_EQ(w.warnings[0], "managed_gradient_accumulation is parsed but not supported by deepspeed.cpp yet; ignored "
                           "(false: the engine always owns the boundary, an update every gradient_accumulation_steps "
                           "micro-batches)");
  EXPECT_EQ(w.warnings[1], "log_level is parsed but not supported by deepspeed.cpp yet; ignored (deepspeed.cpp's log "
                           "level is not set from the config)");
  EXPECT_EQ(w.warnings[2], "data_types.param_dtype is parsed but not supported by deepspeed.cpp yet; ignored "
                           "(parameters and buffers keep the training dtype)");
  EXPECT_EQ(w.warnings[3], "expert_parallel is parsed but not supported by deepspeed.cpp yet; ignored");
  EXPECT_EQ(test::load_error(with_batch(R"("gradient_allreduce_op": "max")")),
            "gradient_allreduce_op: Invalid gradient_allreduce_op. Supported operations: ['mean', 'sum']. Got: "
            "\"max\"");
  try {
    test::load(with_batch(R"("gradient_allreduce_op": "sum")"));
    FAIL() << "expected NotSupported";
  } catch (const NotSupported& e) {
    EXPECT_EQ(std::string(e.what()), "gradient_allreduce_op: \"sum\" is not implemented by deepspeed.cpp, which "
                                     "averages gradients over the data-parallel ranks; use \"mean\" (the default)");
  }
}

// --- the data-parallel world the triple is resolved for ---

TEST(Parity, SequenceParallelSizeDividesTheWorldBeforeTheTriple) {
  const DataParallelWorld dp = resolve_data_parallel_world(8, ParallelSizes{1, 1, 2});
  EXPECT_EQ(dp.size, 4);
  EXPECT_EQ(dp.term(), "data-parallel world 4");
  EXPECT_EQ(dp.derivation(), "data-parallel world 4 = world 8 / (sequence_parallel_size 2)");
  const BatchTriple b = resolve_batch_triple(32, nullopt, 2, dp);  // M = 32 // 4 // 2
  EXPECT_EQ(b.train_micro_batch_size_per_gpu, 4);
  // As DeepSpeed's mpu: world / (pipe x sequence x tensor).
  const DataParallelWorld all = resolve_data_parallel_world(16, ParallelSizes{2, 2, 2});
  EXPECT_EQ(all.size, 2);
  EXPECT_EQ(all.derivation(),
            "data-parallel world 2 = world 16 / (pipeline.stages 2 x sequence_parallel_size 2 x "
            "tensor_parallel.autotp_size 2)");
  EXPECT_TRUE(resolve_data_parallel_world(8, ParallelSizes{}).trivial());
}

TEST(Parity, ParallelSizesThatDoNotDivideTheWorldNameTheKey) {
  try {
    resolve_data_parallel_world(6, ParallelSizes{1, 1, 4});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "sequence_parallel_size: world 6 is not divisible by sequence_parallel_size 4 (the batch triple is "
              "resolved for the data-parallel world, world / (pipeline.stages x sequence_parallel_size x "
              "tensor_parallel.autotp_size), which must be a whole number; values that fit: 1, 2, 3, 6)");
  }
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "pipeline": {"stages": 2},
      "tensor_parallel": {"autotp_size": 4}})", 4),
            "tensor_parallel.autotp_size: world 4 is not divisible by pipeline.stages 2 x tensor_parallel.autotp_size "
            "4 = 8 (the batch triple is resolved for the data-parallel world, world / (pipeline.stages x "
            "sequence_parallel_size x tensor_parallel.autotp_size), which must be a whole number; values that fit: "
            "1, 2)");
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "sequence_parallel_size": 0})"),
            "sequence_parallel_size: expected an integer 1..1048576, got 0");
}

TEST(Parity, BatchErrorsUnderSequenceParallelismShowTheDataParallelWorld) {
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 2, "sequence_parallel_size": 2})", 8),
            "Micro batch size per gpu: 0 has to be greater than 0 (train_batch_size 2 / (data-parallel world 4 x "
            "GAS 1) = 0 micro-batch per rank; data-parallel world 4 = world 8 / (sequence_parallel_size 2))");
}

TEST(Parity, PipelineStagesDivideTheWorldBeforeTheBatchTriple) {
  // As DeepSpeed: the triple is resolved for world / pipeline.stages (the engine then needs a
  // PipelineModule: runtime/pipeline_engine.h).
  const Config pp = test::load(R"({"train_batch_size": 8, "pipeline": {"stages": 2}})", 8);
  EXPECT_EQ(pp.data_parallel_size, 4);
  EXPECT_EQ(pp.train_micro_batch_size_per_gpu, 2);
  EXPECT_EQ(pp.parallel_sizes.pipeline_stages, 2);
  // Ulysses is: sequence_parallel_size divides the world before the batch triple.
  const Config sp = test::load(R"({"train_batch_size": 8, "sequence_parallel_size": 2})", 8);
  EXPECT_EQ(sp.data_parallel_size, 4);
  EXPECT_EQ(sp.train_micro_batch_size_per_gpu, 2);
  // Sizes of 1 (autotp_size 0 = off, stages "auto") are the plain data-parallel world, silently.
  const Config c = test::load(R"({"train_batch_size": 8, "sequence_parallel_size": 1,
      "tensor_parallel": {"autotp_size": 0, "tp_overlap_comm": false}, "pipeline": {"stages": "auto"}})", 4);
  EXPECT_EQ(c.data_parallel_size, 4);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 2);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  EXPECT_EQ(test::value_of(c, "sequence_parallel_size"), "1");
  EXPECT_EQ(test::value_of(c, "tensor_parallel.autotp_size"), "0");
  EXPECT_EQ(test::value_of(c, "pipeline.stages"), "\"auto\"");
}

TEST(Parity, AutoTpSizeDividesTheWorldBeforeTheBatchTriple) {
  // autotp_size 2 at world 8: a data-parallel world of 4 (DeepSpeed's TP training config).
  const Config c = test::load(R"({"train_batch_size": 16, "gradient_accumulation_steps": 2,
      "tensor_parallel": {"autotp_size": 2, "tp_overlap_comm": false}})", 8);
  EXPECT_EQ(c.parallel_sizes.autotp_size, 2);
  EXPECT_EQ(c.data_parallel_size, 4);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 2);
  // The legacy spelling (TPConfig under "tensor_parallel" or its alias "tp") gives the same size.
  for (const char* legacy : {R"("tensor_parallel": {"tp_size": 2})", R"("tp": {"tp_size": 2})"}) {
    const Config l = test::load(fmt::format(R"({{"train_batch_size": 16, "tensor_parallel": {{{}}}}})", legacy), 8);
    EXPECT_EQ(l.parallel_sizes.autotp_size, 2) << legacy;
    EXPECT_EQ(l.data_parallel_size, 4) << legacy;
  }
  // Overlapping the column layers' backward all-reduce: read (default false, as DeepSpeed's).
  const Config overlap = test::load(R"({"train_batch_size": 16, "tensor_parallel": {"autotp_size": 2,
      "tp_overlap_comm": true}})", 8);
  EXPECT_TRUE(overlap.warnings.empty()) << overlap.warnings.front();
  EXPECT_TRUE(overlap.parallel_sizes.tp_overlap_comm);
  EXPECT_FALSE(c.parallel_sizes.tp_overlap_comm);
  // deepspeed.cpp's own vocab-parallel key: read, and named when it cannot do anything.
  EXPECT_TRUE(test::load(R"({"train_batch_size": 16, "tensor_parallel": {"autotp_size": 2, "vocab_parallel": true}})", 8)
                  .parallel_sizes.vocab_parallel);
  const Config idle = test::load(R"({"train_batch_size": 16, "tensor_parallel": {"vocab_parallel": true}})", 8);
  ASSERT_EQ(idle.warnings.size(), 1u);
  EXPECT_EQ(idle.warnings.front(), "tensor_parallel.vocab_parallel has no effect without tensor_parallel.autotp_size > 1");
  EXPECT_NE(test::load_error(R"({"train_batch_size": 16, "tensor_parallel": {"autotp_size": 2, "vocab_parallel": 1}})", 8)
                .find("tensor_parallel.vocab_parallel"),
            std::string::npos);
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 16, "tensor_parallel": {"autotp_size": 4,
                                 "tp": {"tp_size": 2}}})", 8),
            "tensor_parallel.autotp_size: 4 disagrees with tensor_parallel.tensor_parallel.tp_size 2 (the legacy "
            "spelling of the same size); give one of them");
}

// --- the batch triple's errors: DeepSpeed's text, then the keys, the world and the arithmetic ---

TEST(Parity, BatchErrorsAddTheArithmetic) {
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 4})", 8),
            "Micro batch size per gpu: 0 has to be greater than 0 (train_batch_size 4 / (world 8 x GAS 1) = 0 "
            "micro-batch per rank)");
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 6, "train_micro_batch_size_per_gpu": 2})", 4),
            "Gradient accumulation steps: 0 has to be greater than 0 (train_batch_size 6 / (micro 2 x world 4) = 0 "
            "accumulation steps)");
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4,
                                 "gradient_accumulation_steps": 2})", 4),
            "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step "
            "* world_size 30 != 4 * 2 * 4 (micro 4 x GAS 2 x world 4 = 32, not train_batch_size 30)");
}

// --- hjson: what DeepSpeed's loader accepts beyond JSON ---

TEST(Parity, HjsonTrailingCommasAndHashComments) {
  const Config c = test::load("{\n"
                              "  # DeepSpeed reads configs with hjson\n"
                              "  \"train_batch_size\": 8,  # a comment after a value\n"
                              "  \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"betas\": [0.9, 0.95,],},},\n"
                              "  // and JSON-with-comments\n"
                              "  \"tensorboard\": {\"job_name\": \"run#1 // not a comment\",},\n"
                              "}\n");
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_DOUBLE_EQ(c.optimizer->params.betas[1], 0.95);
  EXPECT_EQ(c.tensorboard.job_name, "run#1 // not a comment");
  EXPECT_TRUE(c.warnings.empty());
}

TEST(Parity, HjsonExtrasKeepDuplicateKeysAndLineColumnErrors) {
  EXPECT_EQ(test::load_error("{\"train_batch_size\": 8, # first\n \"train_batch_size\": 8,}"),
            "train_batch_size: duplicate key in one object of <string> (DeepSpeed rejects duplicate keys; keep one)");
  // The error after a # comment and a trailing comma is placed in the file's own line and column.
  const std::string msg = test::load_error("{\"train_batch_size\": 8, # note\n  \"fp16\": {\"enabled\": tru,},\n}");
  EXPECT_NE(msg.find("<string>: invalid JSON at line 2, column"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid literal"), std::string::npos) << msg;
  // A comma with no value before it stays an error, as in hjson.
  EXPECT_NE(test::load_error(R"({"train_batch_size": 8, "x": [1,,]})").find("invalid JSON at line 1, column 33"),
            std::string::npos)
      << test::load_error(R"({"train_batch_size": 8, "x": [1,,]})");
  EXPECT_NE(test::load_error("{,}").find("invalid JSON at line 1, column 2"), std::string::npos);
}

// --- ds-report --config says which DeepSpeed semantics it applied ---

TEST(Parity, ReportNamesTheDeepSpeedSemantics) {
  const Config c = test::load(R"({"train_batch_size": 8})", 2);
  const std::string r = render_config_report(c);
  EXPECT_EQ(r.substr(0, r.find('\n', r.find('\n') + 1) + 1),
            "DeepSpeed config <string> (world size 2):\n"
            "semantics: DeepSpeed 0.19.x (keys, defaults and batch arithmetic; docs/config-defaults.md)\n");
  EXPECT_EQ(nlohmann::json::parse(render_config_report_json(c))["semantics"], "DeepSpeed 0.19.x");
}

}  // namespace
}  // namespace ds
