// Limits the loader enforces beyond DeepSpeed's own rules (issue 22): nesting depth, numbers out of
// range for a double or an fp32, the batch-size bound, fp16 loss scales, and what the engine cannot
// run (refused at load time so ds-report --config agrees with the engine).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "config/json_parse.h"
#include "config/support.h"
#include "config_test_util.h"

namespace ds {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// The message of any ds::Error `text` throws, or "".
std::string any_error(const std::string& text, int world_size = 1) {
  try {
    load_config_text(text, world_size, "ds.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Limits, NestingDepthIsBoundedWithPosition) {
  // 64 levels in all (the config object is one) load; one more is refused at the bracket opening it.
  EXPECT_EQ(any_error(R"({"train_batch_size": 1, "x": )" + nested(63) + "}"), "");
  EXPECT_EQ(any_error(R"({"train_batch_size": 1, "x": )" + nested(64) + "}"),
            "ds.json: line 1, column 93: arrays and objects nested deeper than 64 levels (the limit; a DeepSpeed "
            "config nests fewer than 10)");
  // 100,000 levels: the same message, no stack overflow; objects count too, brackets in strings and
  // comments do not.
  EXPECT_NE(any_error(nested(100000)).find("nested deeper than 64 levels"), std::string::npos);
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_NE(any_error(objects).find("ds.json: line 1, column 321: arrays and objects nested deeper than 64"),
            std::string::npos);
  EXPECT_EQ(any_error("{\"train_batch_size\": 1, // [[[[\n \"s\": \"" + std::string(200, '[') + "\" /* {{{{ */}"), "");
}

TEST(Limits, NumberOutOfRangeForADoubleNamesFileLineAndKey) {
  EXPECT_EQ(any_error("{\"train_batch_size\": 1,\n \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 1e400}}}"),
            "ds.json: line 2, column 49: optimizer.params.lr: number out of range for a double: 1e400 (the largest "
            "double is about 1.8e308)");
  EXPECT_EQ(any_error(R"({"x": [1, 2, -1E+999]})"),
            "ds.json: line 1, column 14: x[2]: number out of range for a double: -1E+999 (the largest double is "
            "about 1.8e308)");
  // Underflow is not an error (it is 0, as everywhere); a string holding the digits is skipped.
  EXPECT_EQ(any_error(R"({"s": "1e400", "train_batch_size": 1, "gradient_clipping": 1e-400})"), "");
}

TEST(Limits, RealsMustBeFiniteFp32) {
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"lr": 1e39}}})",
                      "optimizer.params.lr: expected a number >= 0.0 that is finite in fp32 (magnitude <= "
                      "3.4028234663852886e+38), got 1e+39");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 1, "gradient_clipping": 1e300})", "gradient_clipping: expected a number");
  // inf and NaN cannot be written in JSON, but a config built in code can hold them.
  nlohmann::json j = {{"train_batch_size", 1}, {"fp16", {{"enabled", true}, {"loss_scale", INFINITY}}}};
  EXPECT_THROW(load_config_json(j, 1), ConfigError);
  j["fp16"]["loss_scale"] = std::nan("");
  try {
    load_config_json(j, 1);
    ADD_FAILURE() << "NaN loss_scale accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fp16.loss_scale: expected a number >= 0.0 that is finite in fp32"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("got nan"), std::string::npos) << e.what();
  }
}

TEST(Limits, IntegersThatHadNoRange) {
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 1, "zero_optimization": {"module_granularity_threshold": -5}})",
                      "zero_optimization.module_granularity_threshold: expected an integer >= 0, got -5");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 1, "zero_optimization": {"mics_shard_size": -2}})",
                      "zero_optimization.mics_shard_size: expected an integer >= -1, got -2");
}

TEST(Limits, BatchSizesAreBounded) {
  EXPECT_EQ(test::load_error(R"({"train_micro_batch_size_per_gpu": 9223372036854775807})"),
            "train_micro_batch_size_per_gpu: 9223372036854775807 is above the limit 2147483647 (2^31 - 1) for batch "
            "sizes: no training run comes near it (the largest use a few times 2^16 sequences per step), and below "
            "it every count and offset computed from the batch (x sequence length x hidden size) fits in 64-bit "
            "integers");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "gradient_accumulation_steps": 1e12})",
                      "gradient_accumulation_steps: 1000000000000 is above the limit 2147483647");
  // Each member within the limit, the product not: named as the derived global batch.
  EXPECT_CONFIG_ERROR(R"({"train_micro_batch_size_per_gpu": 2000000000, "gradient_accumulation_steps": 2000000000})",
                      "train_batch_size: 4000000000000000000 (micro 2000000000 x GAS 2000000000 x world 1) is above "
                      "the limit 2147483647");
  EXPECT_NE(test::load_error(R"({"train_micro_batch_size_per_gpu": 2147483647})", 2)
                .find("train_batch_size: 4294967294 (micro 2147483647 x GAS 1 x world 2) is above the limit"),
            std::string::npos);
  EXPECT_EQ(test::load(R"({"train_micro_batch_size_per_gpu": 2147483647})").train_batch_size, 2147483647);
  // Huge negative values get DeepSpeed's message, without overflow on the way.
  EXPECT_EQ(test::load_error(R"({"train_micro_batch_size_per_gpu": -9223372036854775807,
                                 "gradient_accumulation_steps": -9223372036854775807})"),
            "Micro batch size per gpu: -9223372036854775807 has to be greater than 0 "
            "(train_micro_batch_size_per_gpu as given)");
}

TEST(Limits, InitialScalePowerMustGiveAFiniteFp32) {
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 1, "fp16": {"enabled": true, "initial_scale_power": 1000}})"),
            "fp16.initial_scale_power: 1000 is above the limit 127: the dynamic loss scale starts at "
            "2^initial_scale_power, which must be a finite fp32 (2^128 and above are inf); DeepSpeed's default is 16");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 1, "fp16": {"initial_scale_power": 128}})",
                      "fp16.initial_scale_power: 128 is above the limit 127");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 1, "fp16": {"initial_scale_power": -1}})",
                      "fp16.initial_scale_power: expected an integer >= 0, got -1");
  const Config ok = test::load(R"({"train_batch_size": 1, "fp16": {"enabled": true, "initial_scale_power": 32}})");
  EXPECT_TRUE(ok.warnings.empty());
}

TEST(Limits, HighInitialScalePowerWarnsWithTheSkippedSteps) {
  // ZeRO: hysteresis 2 uses one overflow before the first halving.
  const Config z = test::load(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2},
                                  "fp16": {"enabled": true, "initial_scale_power": 100}})");
  ASSERT_EQ(z.warnings.size(), 1u);
  EXPECT_NE(z.warnings[0].find("fp16.initial_scale_power: 100 starts the dynamic loss scale at 2^100 = 1.27e+30"),
            std::string::npos) << z.warnings[0];
  EXPECT_NE(z.warnings[0].find("at least 69 skipped steps before it is down to 2^32"), std::string::npos) << z.warnings[0];
  // Stage 0 (FP16_Optimizer) has no hysteresis; a disabled fp16 section warns about nothing.
  const Config s0 = test::load(R"({"train_batch_size": 1, "fp16": {"enabled": true, "initial_scale_power": 40}})");
  ASSERT_EQ(s0.warnings.size(), 1u);
  EXPECT_NE(s0.warnings[0].find("at least 8 skipped steps"), std::string::npos) << s0.warnings[0];
  EXPECT_TRUE(test::load(R"({"train_batch_size": 1, "fp16": {"initial_scale_power": 40}})").warnings.empty());
}

TEST(Limits, StaticLossScale) {
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 1, "fp16": {"enabled": true, "loss_scale": 1e39}})",
                      "fp16.loss_scale: expected a number >= 0.0 that is finite in fp32");
  for (const char* scale : {"1e10", "1e30", "1e38"}) {
    const Config c = test::load(std::string(R"({"train_batch_size": 1, "fp16": {"enabled": true, "loss_scale": )") +
                                scale + "}}");
    ASSERT_EQ(c.warnings.size(), 1u) << scale;
    EXPECT_NE(c.warnings[0].find("fp16.loss_scale: the static scale"), std::string::npos) << c.warnings[0];
    EXPECT_NE(c.warnings[0].find("is above 2^32"), std::string::npos) << c.warnings[0];
    EXPECT_NE(c.warnings[0].find("overflows fp16 at that scale and its step is skipped"), std::string::npos);
  }
  EXPECT_TRUE(test::load(R"({"train_batch_size": 1, "fp16": {"enabled": true, "loss_scale": 65536}})").warnings.empty());
}

// Refused at load time exactly as the engine refuses them at start (config/support.h).
TEST(Limits, WhatTheEngineCannotRunIsRefusedAtLoad) {
  auto not_supported = [](const std::string& text) -> std::string {
    try {
      load_config_text(text, 1);
    } catch (const NotSupported& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(not_supported(R"({"train_batch_size": 2, "zero_optimization": {"stage": 1},
                             "zero_allow_untested_optimizer": true, "optimizer": {"type": "Lamb"}})")
                .find("optimizer.type: Lamb needs each parameter's whole gradient"),
            std::string::npos);
  // Lamb at stage 1 without the untested gate: still the not-implemented message, not the gate's.
  EXPECT_NE(not_supported(R"({"train_batch_size": 2, "zero_optimization": {"stage": 1}, "optimizer": {"type": "Lamb"}})")
                .find("optimizer.type: Lamb"),
            std::string::npos);
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 2, "scheduler": {"type": "WarmupLR"}})",
                      "scheduler: an LR schedule needs an optimizer");
}

TEST(Limits, NvmeSwapBuffers) {
  const std::string head = R"({"train_batch_size": 2, "zero_allow_untested_optimizer": true, "optimizer": {"type": ")";
  auto cfg = [&](const std::string& type, int buffers, bool pr, bool pw, int stage = 3) {
    return head + type + R"("}, "zero_optimization": {"stage": )" + std::to_string(stage) +
           R"(, "offload_optimizer": {"device": "nvme", "nvme_path": "/x", "buffer_count": )" + std::to_string(buffers) +
           R"(, "pipeline_read": )" + (pr ? "true" : "false") + R"(, "pipeline_write": )" + (pw ? "true" : "false") +
           "}}}";
  };
  EXPECT_CONFIG_ERROR(cfg("Adam", 4, true, true),
                      "zero_optimization.offload_optimizer.buffer_count: 4 swap buffers are too few: pipeline_read and "
                      "pipeline_write keeps 3 sub-group(s) in flight, each in 3 buffers (the fp32 master and Adam's 2 "
                      "state(s)): 9 buffers (raise buffer_count to 9 or turn pipelining off)");
  EXPECT_NO_THROW(test::load(cfg("Adam", 9, true, true)));
  EXPECT_NO_THROW(test::load(cfg("Adam", 3, false, false)));
  EXPECT_CONFIG_ERROR(cfg("Lion", 3, true, false), "raise buffer_count to 4");
  EXPECT_NO_THROW(test::load(cfg("SGD", 2, true, false)));  // SGD without momentum: the master only
  EXPECT_CONFIG_ERROR(cfg("Adam", 4, true, true, 2), "raise buffer_count to 9");  // stages 1-2 swap too
  // aio settings the NVMe engine refuses, only where NVMe offload uses them.
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 2, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme",
                         "nvme_path": "/x"}}, "aio": {"block_size": 1000}})",
                      "aio.block_size: 1000 must be a positive multiple of 4096 bytes");
  EXPECT_NO_THROW(test::load(R"({"train_batch_size": 2, "aio": {"block_size": 1000, "queue_depth": 5000}})"));
}

TEST(Limits, DeviceRules) {
  const Config c = test::load(R"({"train_batch_size": 2, "data_types": {"compute_dtype": "fp16"}})");
  EXPECT_THROW(check_device_support(c, /*has_accelerator=*/false), NotSupported);
  EXPECT_NO_THROW(check_device_support(c, /*has_accelerator=*/true));
}

}  // namespace
}  // namespace ds
