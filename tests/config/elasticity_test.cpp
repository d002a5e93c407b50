// Elasticity: compute_elastic_config against DeepSpeed's own results, and the section in a config.
// Expected values: DeepSpeed's tests/unit/elasticity/test_elastic.py where it states them (9792 and
// 23 sizes, micro 17 at 64, micro 3 at 4, the version 0.2 micro batches per data-parallel rank);
// the other rows were computed by DeepSpeed's elasticity.py (deepspeedai/DeepSpeed c5601db) run on the
// same configs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "config/elasticity.h"
#include "config_test_util.h"

namespace ds {
namespace {

// DeepSpeed's ds_config fixture: max 10000, micro [8, 12, 16, 17], 32..1500 GPUs, version 0.1.
ElasticityConfig fixture() {
  ElasticityConfig c;
  c.enabled = true;
  c.max_train_batch_size = 10000;
  c.micro_batch_sizes = {8, 12, 16, 17};
  c.min_gpus = 32;
  c.max_gpus = 1500;
  c.min_time = 20;
  c.version = 0.1;
  return c;
}

ElasticityConfig with(int64_t max_batch, std::vector<int64_t> micro, int64_t min_gpus, int64_t max_gpus) {
  ElasticityConfig c = fixture();
  c.max_train_batch_size = max_batch;
  c.micro_batch_sizes = std::move(micro);
  c.min_gpus = min_gpus;
  c.max_gpus = max_gpus;
  return c;
}

std::string error_of(const ElasticityConfig& c, int64_t world) {
  try {
    compute_elastic_config(c, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Elasticity, DeepSpeedBasic10k) {
  const ElasticBatch b = compute_elastic_config(fixture(), 0);
  EXPECT_EQ(b.train_batch_size, 9792);
  EXPECT_EQ(b.valid_world_sizes,
            (std::vector<int64_t>{32, 34, 36, 48, 51, 64, 68, 72, 96, 102, 136, 144, 153, 192, 204, 272, 288, 306,
                                  408, 576, 612, 816, 1224}));
  for (int64_t w : b.valid_world_sizes) {  // DeepSpeed's own property check
    ASSERT_EQ(b.train_batch_size % w, 0);
    bool some_micro = false;
    for (int64_t m : fixture().micro_batch_sizes) some_micro |= (b.train_batch_size / w) % m == 0;
    EXPECT_TRUE(some_micro) << w;
  }
  EXPECT_EQ(b.micro_batch_size, 0) << "no world size given";
}

TEST(Elasticity, DeepSpeedValidAndInvalidWorldSize) {
  const ElasticBatch b = compute_elastic_config(fixture(), 64);
  EXPECT_EQ(b.micro_batch_size, 17);
  EXPECT_EQ(b.gradient_accumulation_steps, 9);  // 9792 / (17 x 64)
  const std::string e = error_of(fixture(), 128);
  EXPECT_NE(e.find("World size (128) is not valid with the current list of valid GPU counts: [32, 34"), std::string::npos) << e;
}

struct Row {
  const char* name;
  ElasticityConfig config;
  int64_t world;
  int64_t batch;
  std::vector<int64_t> valid;
  int64_t micro;
};

TEST(Elasticity, TableMatchesDeepSpeed) {
  ElasticityConfig smaller = with(2000, {2, 4, 6}, 1, 10000);
  smaller.prefer_larger_batch = false;
  ElasticityConfig defaults;  // max 2000, micro [2, 4, 6], 1..10000
  defaults.enabled = true;
  defaults.version = 0.1;
  const std::vector<Row> rows = {
      // test_proper_mbsz: the LCM 42 is above the cap of 32 and no longer offered.
      {"proper_mbsz", with(32, {1, 2, 3, 7}, 1, 10000), 4, 24, {1, 2, 3, 4, 6, 8, 12, 24}, 3},
      // test_batch_size_within_max
      {"within_max", with(100, {8, 10, 12}, 1, 10000), 0, 96, {1, 2, 3, 4, 6, 8, 12}, 0},
      // TestNonElasticBatchParams' section at world 2
      {"max4", with(4, {1, 2, 3, 4}, 1, 4), 2, 4, {1, 2, 4}, 2},
      // the multihost elastic test's section at each size it runs
      {"max12_w4", with(12, {1, 2, 3}, 1, 4), 4, 12, {1, 2, 3, 4}, 3},
      {"max12_w3", with(12, {1, 2, 3}, 1, 4), 3, 12, {1, 2, 3, 4}, 2},
      {"max12_w2", with(12, {1, 2, 3}, 1, 4), 2, 12, {1, 2, 3, 4}, 3},
      {"max12_w1", with(12, {1, 2, 3}, 1, 4), 1, 12, {1, 2, 3, 4}, 3},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const ElasticBatch b = compute_elastic_config(r.config, r.world);
    EXPECT_EQ(b.train_batch_size, r.batch);
    EXPECT_EQ(b.valid_world_sizes, r.valid);
    EXPECT_EQ(b.micro_batch_size, r.micro);
    if (r.world > 0) {
      EXPECT_EQ(b.train_batch_size, b.micro_batch_size * b.gradient_accumulation_steps * r.world);
    }
  }
  // Long lists: the batch, the count and the ends.
  struct Long {
    const char* name;
    ElasticityConfig config;
    int64_t batch;
    size_t count;
    int64_t last;
  };
  const std::vector<Long> longs = {{"defaults", defaults, 1680, 32, 840},
                                   {"prefer_smaller", smaller, 1680, 32, 840},
                                   {"beyond_the_hcn_list", with(1000000, {1}, 1, 100000), 720720, 233, 90090}};
  for (const Long& l : longs) {
    SCOPED_TRACE(l.name);
    const ElasticBatch b = compute_elastic_config(l.config, 0);
    EXPECT_EQ(b.train_batch_size, l.batch);
    EXPECT_EQ(b.valid_world_sizes.size(), l.count);
    EXPECT_EQ(b.valid_world_sizes.back(), l.last);
  }
}

ElasticityConfig v02(int64_t mp, std::vector<int64_t> micro) {
  ElasticityConfig c = with(64, std::move(micro), 16, 16);
  c.version = 0.2;
  c.model_parallel_size = mp;
  c.num_gpus_per_node = 8;
  return c;
}

// test_model_parallel_v2_microbatch_is_per_dp_rank: WORLD_SIZE 16, return_microbatch.
TEST(Elasticity, Version02MicroBatchIsPerDataParallelRank) {
  const struct {
    int64_t mp;
    std::vector<int64_t> micro;
    int64_t expected;
    int64_t valid;
  } rows[] = {{1, {4, 8}, 4, 16}, {2, {4, 8}, 8, 8}, {4, {4, 8}, 8, 4}, {2, {8}, 8, 8}, {4, {8}, 8, 4}};
  for (const auto& r : rows) {
    SCOPED_TRACE(r.mp);
    const ElasticBatch b = compute_elastic_config_for_scheduler(v02(r.mp, r.micro), 16);
    EXPECT_EQ(b.train_batch_size, 64);
    EXPECT_EQ(b.micro_batch_size, r.expected);
    EXPECT_EQ(b.valid_world_sizes, std::vector<int64_t>{r.valid});
    EXPECT_EQ((b.train_batch_size / (16 / r.mp)) % b.micro_batch_size, 0);
  }
}

TEST(Elasticity, Version02SizesOutsideTheListGetABatchOfTheirOwn) {
  ElasticityConfig c = with(100, {2, 3}, 4, 64);
  c.version = 0.2;
  c.num_gpus_per_node = 4;
  const ElasticBatch in_list = compute_elastic_config_for_scheduler(c, 8);
  EXPECT_EQ(in_list.train_batch_size, 96);
  EXPECT_EQ(in_list.valid_world_sizes, (std::vector<int64_t>{4, 8, 12, 16, 24, 32, 48}));
  EXPECT_EQ(in_list.micro_batch_size, 3);
  const ElasticBatch outside = compute_elastic_config_for_scheduler(c, 20);  // 80 = floor(100 / 40) x 40
  EXPECT_EQ(outside.train_batch_size, 80);
  EXPECT_EQ(outside.valid_world_sizes, std::vector<int64_t>{20});
  EXPECT_EQ(outside.micro_batch_size, 2);
  // test_model_parallel_v2_valid: DeepSpeed's fixture at 16 GPUs, model parallel 4, 8 per node.
  ElasticityConfig f = fixture();
  f.version = 0.2;
  f.model_parallel_size = 4;
  f.num_gpus_per_node = 8;
  const ElasticBatch mp4 = compute_elastic_config_for_scheduler(f, 16);
  EXPECT_EQ(mp4.train_batch_size, 9996);
  EXPECT_EQ(mp4.micro_batch_size, 17);
}

TEST(Elasticity, DeepSpeedErrorCases) {
  ElasticityConfig c = fixture();
  c.enabled = false;
  EXPECT_NE(error_of(c, 0).find("Elasticity is disabled"), std::string::npos);
  c = fixture();
  c.version = 0.3;  // test_future_elastic_version
  EXPECT_NE(error_of(c, 0).find("elasticity.version: Attempting to run elasticity version 0.3"), std::string::npos);
  c = fixture();
  c.model_parallel_size = 4;  // test_model_parallel_v1_invalid
  c.num_gpus_per_node = 8;
  EXPECT_NE(error_of(c, 0).find("does not support model-parallel training"), std::string::npos);
  c = v02(16, {8, 12});  // test_model_parallel_v2_invalid
  EXPECT_NE(error_of(c, 16).find("elasticity.num_gpus_per_node: In Elasticity v0.2, number of GPUs per node:8"),
            std::string::npos);
  c = v02(1, {8});
  EXPECT_NE(error_of(c, 0).find("Elasticity V 0.2 needs WORLD_SIZE"), std::string::npos);
  c = with(10, {4, 16}, 1, 100);  // a micro batch above the cap
  EXPECT_NE(error_of(c, 0).find("elasticity.micro_batch_sizes: All micro batches must be less than or equal"),
            std::string::npos);
  c = with(12, {5}, 4, 8);  // 10 is the only batch; 2 and 1 lie below min_gpus 4: nothing fits
  EXPECT_NE(error_of(c, 0).find("elasticity: no world size in min_gpus 4 .. max_gpus 8 fits"), std::string::npos)
      << error_of(c, 0);
}

// The section's own checks (ElasticityConfig.__init__), through a whole config.
TEST(Elasticity, SectionChecks) {
  const std::string head = R"({"elasticity": {"enabled": true, )";
  EXPECT_CONFIG_ERROR(head + R"("micro_batch_sizes": [2]}})", "elasticity.max_train_batch_size: Elasticity config missing max_train_batch_size");
  EXPECT_CONFIG_ERROR(head + R"("max_train_batch_size": 8}})", "Elasticity config missing micro_batch_sizes");
  // test_invalid_config_values
  for (const char* bad : {"[1, 4, -1, 2, -10]", "5", "[\"a\", null, 0.5]", "[2, 0.5, 4]"})
    EXPECT_CONFIG_ERROR(head + R"("max_train_batch_size": 8, "micro_batch_sizes": )" + bad + "}}",
                        "elasticity.micro_batch_sizes: Elasticity expected");
  EXPECT_CONFIG_ERROR(head + R"("max_train_batch_size": 8, "micro_batch_sizes": [2], "min_gpus": -1}})",
                      "elasticity.min_gpus: Elasticity min/max gpus must be > 0");
  EXPECT_CONFIG_ERROR(head + R"("max_train_batch_size": 8, "micro_batch_sizes": [2], "max_gpus": -1}})",
                      "elasticity.max_gpus: Elasticity min/max gpus must be > 0");
  EXPECT_CONFIG_ERROR(head + R"("max_train_batch_size": 8, "micro_batch_sizes": [2], "min_gpus": 4, "max_gpus": 2}})",
                      "min_gpus cannot be greater than max_gpus");
}

std::string elastic(const std::string& extra = "") {
  return R"({"elasticity": {"enabled": true, "max_train_batch_size": 12, "micro_batch_sizes": [1, 2, 3],
             "min_gpus": 1, "max_gpus": 4, "version": 0.1)" + extra + "}";
}

TEST(Elasticity, TakesOverTheBatchTriple) {
  setenv("DEEPSPEED_ELASTICITY_CONFIG", R"({"max_train_batch_size": 12, "micro_batch_sizes": [1, 2, 3], "version": 0.1})", 1);
  for (const auto& [world, micro, gas] : {std::tuple{1, 3, 4}, {2, 3, 2}, {3, 2, 2}, {4, 3, 1}}) {
    const Config c = test::load(elastic() + "}", world);
    EXPECT_EQ(c.train_batch_size, 12) << world;
    EXPECT_EQ(c.train_micro_batch_size_per_gpu, micro) << world;
    EXPECT_EQ(c.gradient_accumulation_steps, gas) << world;
    EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  }
  EXPECT_NE(test::load_error(elastic() + "}", 5).find("World size (5) is not valid"), std::string::npos);
  // The data-parallel world counts: 4 ranks in 2 pipeline stages are 2 data-parallel ranks.
  const Config piped = test::load(elastic() + R"(, "pipeline": {"stages": 2}})", 4);
  EXPECT_EQ(piped.train_micro_batch_size_per_gpu, 3);
  EXPECT_EQ(piped.gradient_accumulation_steps, 2);
  unsetenv("DEEPSPEED_ELASTICITY_CONFIG");
}

TEST(Elasticity, BatchKeysNeedIgnoreNonElasticBatchInfo) {
  setenv("DEEPSPEED_ELASTICITY_CONFIG", R"({"max_train_batch_size": 12, "micro_batch_sizes": [1, 2, 3], "version": 0.1})", 1);
  const std::string with_batch = elastic() + R"(, "train_batch_size": 2})";
  EXPECT_NE(test::load_error(with_batch).find("train_batch_size: One or more batch related parameters were found"),
            std::string::npos);
  const Config c = test::load(elastic(R"(, "ignore_non_elastic_batch_info": true)") + R"(, "train_batch_size": 2})");
  EXPECT_EQ(c.train_batch_size, 12);
  EXPECT_TRUE(test::has_warning(c, "[Elasticity] overriding train_batch_size: 2 -> 12"));
  unsetenv("DEEPSPEED_ELASTICITY_CONFIG");
}

TEST(Elasticity, SchedulerMustHaveSeenTheSameSection) {
  // TestElasticConfigChanged: the scheduler saw max 27, the runtime has 12.
  setenv("DEEPSPEED_ELASTICITY_CONFIG", R"({"elasticity": {"max_train_batch_size": 27, "micro_batch_sizes": [1, 2, 3], "version": 0.1}})", 1);
  EXPECT_NE(test::load_error(elastic() + "}").find("elasticity.max_train_batch_size: Elastic config "
                                                   "'max_train_batch_size=27' seen by resource scheduler does not "
                                                   "match config passed to runtime max_train_batch_size=12"),
            std::string::npos);
  unsetenv("DEEPSPEED_ELASTICITY_CONFIG");
  const Config c = test::load(elastic() + "}");
  EXPECT_TRUE(test::has_warning(c, "DEEPSPEED_ELASTICITY_CONFIG is not set"));
  // Switched off: the batch keys rule as usual, nothing is computed.
  const Config off = test::load(R"({"train_batch_size": 4, "elasticity": {"enabled": false, "max_train_batch_size": 12}})");
  EXPECT_EQ(off.train_batch_size, 4);
  EXPECT_TRUE(off.warnings.empty());
}

}  // namespace
}  // namespace ds
