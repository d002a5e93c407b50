// The batch-size triple (reference §1.2, DeepSpeed's TestBatchConfig §16.1), messages exact.
#include <gtest/gtest.h>

#include "config/batch_config.h"
#include "config_test_util.h"

namespace ds {
namespace {

using std::nullopt;

std::string triple_error(std::optional<int64_t> T, std::optional<int64_t> M, std::optional<int64_t> G, int W) {
  try {
    resolve_batch_triple(T, M, G, W);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

void expect_triple(std::optional<int64_t> T, std::optional<int64_t> M, std::optional<int64_t> G, int W,
                   int64_t t, int64_t m, int64_t g) {
  const BatchTriple b = resolve_batch_triple(T, M, G, W);
  EXPECT_EQ(b.train_batch_size, t);
  EXPECT_EQ(b.train_micro_batch_size_per_gpu, m);
  EXPECT_EQ(b.gradient_accumulation_steps, g);
}

// DeepSpeed's text, then the arithmetic: "(micro 17 x GAS 2 x world 2 = 68, not train_batch_size 33)".
std::string mismatch(int64_t t, int64_t m, int64_t g, int w, const std::string& derived = "") {
  return "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
         "gradient_acc_step * world_size " +
         std::to_string(t) + " != " + std::to_string(m) + " * " + std::to_string(g) + " * " + std::to_string(w) +
         " (micro " + std::to_string(m) + " x GAS " + std::to_string(g) + " x world " + std::to_string(w) + " = " +
         std::to_string(m * g * w) + ", not train_batch_size " + std::to_string(t) +
         (derived.empty() ? "" : "; " + derived + ", rounded down") + ")";
}

// DeepSpeed's own cases, W=2.
TEST(BatchTriple, DeepSpeedCasesWorldSize2) {
  expect_triple(32, 16, 1, 2, 32, 16, 1);
  expect_triple(32, 8, 2, 2, 32, 8, 2);
  EXPECT_EQ(triple_error(33, 17, 2, 2), mismatch(33, 17, 2, 2));
  EXPECT_EQ(triple_error(32, 18, 1, 2), mismatch(32, 18, 1, 2));
}

TEST(BatchTriple, EachSubsetDerivesTheRest) {
  expect_triple(32, 8, nullopt, 2, 32, 8, 2);        // G = (T // M) // W
  expect_triple(32, nullopt, 2, 2, 32, 8, 2);        // M = (T // W) // G
  expect_triple(nullopt, 8, 2, 2, 32, 8, 2);         // T = M * G * W
  expect_triple(32, nullopt, nullopt, 2, 32, 16, 1); // G = 1, M = T // W
  expect_triple(nullopt, 8, nullopt, 2, 16, 8, 1);   // T = M * W, G = 1
}

TEST(BatchTriple, NeitherBatchKeyIsAnError) {
  const std::string msg = "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided";
  EXPECT_EQ(triple_error(nullopt, nullopt, nullopt, 1), msg);
  EXPECT_EQ(triple_error(nullopt, nullopt, 4, 2), msg);  // only G
}

TEST(BatchTriple, WorldSizes1And4) {
  expect_triple(16, nullopt, nullopt, 1, 16, 16, 1);
  expect_triple(16, 4, nullopt, 1, 16, 4, 4);
  expect_triple(64, nullopt, 2, 4, 64, 8, 2);
  expect_triple(nullopt, 3, 5, 4, 60, 3, 5);
  expect_triple(64, 4, nullopt, 4, 64, 4, 4);
  EXPECT_EQ(triple_error(64, 4, 2, 4), mismatch(64, 4, 2, 4));
}

// Floor division hides inconsistencies until the final equality check.
TEST(BatchTriple, FloorDivisionCaughtByEqualityCheck) {
  EXPECT_EQ(triple_error(33, nullopt, 2, 2),  // M = (33 // 2) // 2 = 8
            mismatch(33, 8, 2, 2, "train_batch_size 33 / (world 2 x GAS 2) = 8 micro-batch per rank"));
  EXPECT_EQ(triple_error(33, 8, nullopt, 2),  // G = (33 // 8) // 2 = 2
            mismatch(33, 8, 2, 2, "train_batch_size 33 / (micro 8 x world 2) = 2 accumulation steps"));
  EXPECT_EQ(triple_error(33, nullopt, nullopt, 2),
            mismatch(33, 16, 1, 2, "train_batch_size 33 / (world 2 x GAS 1) = 16 micro-batch per rank"));
  EXPECT_EQ(triple_error(10, 4, nullopt, 4), "Gradient accumulation steps: 0 has to be greater than 0 "
                                             "(train_batch_size 10 / (micro 4 x world 4) = 0 accumulation steps)");
}

TEST(BatchTriple, NonPositiveValues) {
  EXPECT_EQ(triple_error(2, nullopt, nullopt, 4), "Micro batch size per gpu: 0 has to be greater than 0 "
                                                  "(train_batch_size 2 / (world 4 x GAS 1) = 0 micro-batch per rank)");
  EXPECT_EQ(triple_error(0, 1, 1, 1), "Train batch size: 0 has to be greater than 0 (train_batch_size as given)");
  EXPECT_EQ(triple_error(8, 0, nullopt, 1),
            "Micro batch size per gpu: 0 has to be greater than 0 (train_micro_batch_size_per_gpu as given)");
  EXPECT_EQ(triple_error(8, nullopt, 0, 1),
            "Gradient accumulation steps: 0 has to be greater than 0 (gradient_accumulation_steps as given)");
  EXPECT_EQ(triple_error(-4, -2, 1, 2), "Train batch size: -4 has to be greater than 0 (train_batch_size as given)");
  EXPECT_EQ(triple_error(nullopt, -2, 2, 2),
            "Train batch size: -8 has to be greater than 0 (micro -2 x GAS 2 x world 2 = -8)");
  // Python floor division: (5 // 1) // -2 == -3 (C++ truncation would say -2).
  EXPECT_EQ(triple_error(5, nullopt, -2, 1), "Micro batch size per gpu: -3 has to be greater than 0 "
                                             "(train_batch_size 5 / (world 1 x GAS -2) = -3 micro-batch per rank)");
  EXPECT_NE(triple_error(8, 8, 1, 0).find("world size must be >= 1"), std::string::npos);
}

TEST(BatchTriple, LoaderResolvesWithWorldSizeAndRecordsSources) {
  const Config c = test::load(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", 4);
  EXPECT_EQ(c.train_batch_size, 32);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(c.gradient_accumulation_steps, 2);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(test::source_of(c, "train_batch_size"), "file");
  EXPECT_EQ(test::source_of(c, "train_micro_batch_size_per_gpu"), "derived");
  EXPECT_EQ(test::value_of(c, "train_micro_batch_size_per_gpu"), "4");
  EXPECT_EQ(test::source_of(c, "gradient_accumulation_steps"), "file");
}

TEST(BatchTriple, LoaderErrorsCarryDeepSpeedMessages) {
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 33, "train_micro_batch_size_per_gpu": 17,
                                 "gradient_accumulation_steps": 2})", 2),
            mismatch(33, 17, 2, 2));
  EXPECT_EQ(test::load_error(R"({"gradient_accumulation_steps": 2})"),
            "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
  EXPECT_EQ(test::load_error(R"({"train_batch_size": "eight"})"),
            "train_batch_size: expected an integer or null, got \"eight\"");
}

}  // namespace
}  // namespace ds
