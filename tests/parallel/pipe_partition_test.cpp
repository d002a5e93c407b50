// Pipeline partitioning against DeepSpeed's own unit tests
// (tests/unit/runtime/utils/test_partition.py) and its arithmetic on the layer lists
// PipelineModule partitions.
#include <gtest/gtest.h>

#include <numeric>

#include "parallel/pipe_partition.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

// DeepSpeed's assert_valid_partition.
void expect_valid(const std::vector<int>& parts, int items, int num_parts) {
  ASSERT_EQ(parts.size(), size_t(num_parts) + 1);
  EXPECT_EQ(parts.front(), 0);
  EXPECT_EQ(parts.back(), items);
  for (int p = 0; p < num_parts; ++p) EXPECT_LE(parts[size_t(p)], parts[size_t(p) + 1]);
}

std::vector<double> costs(const std::vector<double>& w, const std::vector<int>& parts) {
  std::vector<double> c;
  for (size_t p = 0; p + 1 < parts.size(); ++p)
    c.push_back(std::accumulate(w.begin() + parts[p], w.begin() + parts[p + 1], 0.0));
  return c;
}

TEST(PipePartition, UniformMatchesDeepSpeed) {
  EXPECT_EQ(partition_uniform(8, 4), (std::vector<int>{0, 2, 4, 6, 8}));
  EXPECT_EQ(partition_uniform(10, 4), (std::vector<int>{0, 3, 6, 8, 10}));  // the residual goes first
  EXPECT_EQ(partition_uniform(2, 4), (std::vector<int>{0, 1, 2, 2, 2}));    // test_short_partition_uniform
  EXPECT_EQ(partition_uniform(0, 2), (std::vector<int>{0, 0, 0}));
  EXPECT_THROW(partition_uniform(3, 0), Error);
}

TEST(PipePartition, BalancedMatchesDeepSpeedTests) {
  expect_valid(partition_balanced(std::vector<double>(10, 1.0), 1), 10, 1);  // test_valid_partition
  expect_valid(partition_balanced({1, 1}, 4), 2, 4);                          // test_short_partition
  const std::vector<double> ones(8, 1.0);                                      // test_easy_balance_balanced
  for (double c : costs(ones, partition_balanced(ones, 4))) EXPECT_EQ(c, 2.0);
  EXPECT_EQ(partition_balanced({0, 1, 2, 3, 3, 3}, 4), (std::vector<int>{0, 3, 4, 5, 6}));        // test_int_balanced
  EXPECT_EQ(partition_balanced({0., 1.1, 1.9, 3., 3., 3.}, 4), (std::vector<int>{0, 3, 4, 5, 6}));  // test_float_balanced
  EXPECT_EQ(partition_balanced({0., 1.1, 30, 3.}, 3), (std::vector<int>{0, 2, 3, 4}));              // test_float_midheavy
  // test_balance_bert: 24 transformer layers of 12596224 between two 52559872 embeddings.
  std::vector<double> bert{52559872};
  for (int i = 0; i < 24; ++i) bert.push_back(12596224);
  bert.push_back(0);
  bert.push_back(52559872);
  const auto parts = partition_balanced(bert, 8);
  expect_valid(parts, int(bert.size()), 8);
  // What DeepSpeed's current (variance-minimising) partition_balanced returns for it.
  EXPECT_EQ(parts, (std::vector<int>{0, 1, 5, 9, 13, 17, 21, 26, 27}));
  EXPECT_THROW(partition_balanced({1, -1, 2}, 2), Error);
}

TEST(PipePartition, LayerMethods) {
  // GPT-2-like: embed (wte + wpe), 4 blocks, head (ln_f + the tied wte, counted again as DeepSpeed does).
  const std::vector<PartitionItem> layers{{"embed", 1000}, {"h.0", 300}, {"h.1", 300},
                                          {"h.2", 300},    {"h.3", 300}, {"head", 900}};
  EXPECT_EQ(partition_layers("uniform", layers, 2), (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(partition_layers("parameters", layers, 2), (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(partition_layers("parameters", layers, 3), (std::vector<int>{0, 1, 5, 6}));
  EXPECT_EQ(partition_layers("type:^h\\.", layers, 2), (std::vector<int>{0, 3, 6}));   // 2 blocks a stage
  EXPECT_EQ(partition_layers("type:H\\.", layers, 4), (std::vector<int>{0, 2, 3, 4, 6}));  // case-insensitive
  EXPECT_THROW(partition_layers("type:nothing", layers, 2), ConfigError);
  EXPECT_THROW(partition_layers("type:(", layers, 2), ConfigError);
  EXPECT_THROW(partition_layers("profile", layers, 2), ConfigError);
}

}  // namespace
}  // namespace ds::parallel
