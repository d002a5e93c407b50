// resolve_shape: the data-parallel size is what the other sizes leave, and every refusal names the
// key and shows the arithmetic. No communicator.
#include <gtest/gtest.h>

#include "parallel/topology_sizes.h"
#include "util/error.h"

namespace ds::parallel::test {
namespace {

std::string config_error(int world, const TopologySizes& sizes) {
  try {
    resolve_shape(world, sizes);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TopologySizes, DataIsWhatIsLeft) {
  const TopologyShape all_one = resolve_shape(8, {});
  EXPECT_EQ(all_one.data, 8);
  EXPECT_TRUE(all_one.trivial());
  const TopologyShape s = resolve_shape(16, {2, 2, 2, 1});
  EXPECT_EQ(s.pipe, 2);
  EXPECT_EQ(s.model, 2);
  EXPECT_EQ(s.sequence, 2);
  EXPECT_EQ(s.data, 2);
  EXPECT_FALSE(s.trivial());
  EXPECT_EQ(resolve_shape(8, {1, 2, 1, 4}).expert, 4);
  EXPECT_EQ(resolve_shape(1, {}).data, 1);
}

TEST(TopologySizes, NotDividingTheWorldNamesTheKeyAndTheArithmetic) {
  EXPECT_EQ(config_error(6, {1, 4, 1, 1}),
            "tensor_parallel.autotp_size: world 6 is not divisible by autotp_size 4 (the data-parallel size is the "
            "world divided by num_stages x autotp_size x sequence_parallel_size and must be a whole number; "
            "autotp_size values that fit: 1, 2, 3, 6)");
  EXPECT_EQ(config_error(8, {2, 3, 1, 1}),
            "tensor_parallel.autotp_size: world 8 is not divisible by num_stages 2 x autotp_size 3 = 6 (the "
            "data-parallel size is the world divided by num_stages x autotp_size x sequence_parallel_size and must "
            "be a whole number; autotp_size values that fit: 1, 2, 4)");
  EXPECT_EQ(config_error(4, {3, 1, 1, 1}).rfind("pipeline.stages: world 4 is not divisible by num_stages 3 (", 0), 0u);
  EXPECT_EQ(config_error(8, {1, 2, 3, 1}).rfind("sequence_parallel_size: world 8 is not divisible by autotp_size 2 x "
                                                "sequence_parallel_size 3 = 6 (",
                                                0),
            0u);
  EXPECT_EQ(config_error(1, {1, 2, 1, 1}).rfind("tensor_parallel.autotp_size: world 1 is not divisible by autotp_size 2", 0),
            0u);
}

TEST(TopologySizes, BadValues) {
  EXPECT_EQ(config_error(4, {0, 1, 1, 1}), "pipeline.stages: num_stages must be a positive integer, got 0");
  EXPECT_EQ(config_error(4, {1, -2, 1, 1}),
            "tensor_parallel.autotp_size: autotp_size must be a positive integer, got -2");
  EXPECT_EQ(config_error(4, {1, 1, 0, 1}),
            "sequence_parallel_size: sequence_parallel_size must be a positive integer, got 0");
  EXPECT_EQ(config_error(4, {1, 1, 1, 0}), "the expert-parallel size (ep_size) must be a positive integer, got 0");
}

TEST(TopologySizes, ExpertMustDivideData) {
  EXPECT_EQ(config_error(8, {1, 2, 1, 3}),
            "the expert-parallel size (ep_size) 3 does not divide the data-parallel size 4 = world 8 / (autotp_size 2); "
            "expert groups are made of data-parallel ranks (ep_size values that fit: 1, 2, 4)");
  EXPECT_THROW(resolve_shape(8, {1, 1, 2, 2}), NotSupported);  // expert with sequence: not yet
}

}  // namespace
}  // namespace ds::parallel::test
