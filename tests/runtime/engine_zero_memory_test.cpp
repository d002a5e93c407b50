// Per-rank memory of model states at each ZeRO stage against DESIGN §5 (Ψ parameters, N ranks,
// 16-bit parameters and gradients, K = 12 bytes of fp32 master + Adam moments per parameter):
//   stage 0: (2+2+K)Ψ   stage 1: 4Ψ + KΨ/N   stage 2: 2Ψ + (2+K)Ψ/N   stage 3: (4+K)Ψ/N
// plus the documented buffers (two gradient buckets at stages 2-3). The engine's ledger must hold
// exactly the formula evaluated on the padded element counts the partition arithmetic gives, and
// be within 1% of the formula on the raw Ψ.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "comm/comm.h"
#include "models/gpt2.h"
#include "util/memory_ledger.h"
#include "zero/gathered_parameters.h"
#include "zero/memory_estimate.h"
#include "zero/model_states.h"
#include "zero/partition.h"
#include "zero/sharded_states.h"
#include "zero/stage3_step_estimate.h"

#include <numeric>

namespace ds {
namespace {

struct Expected {
  double params, grads, master_and_state, buffers;
};

uint64_t model_state_bytes(const MemoryLedger& m) {
  return m.kind_total(MemKind::Params) + m.kind_total(MemKind::Grads) + m.kind_total(MemKind::Master) +
         m.kind_total(MemKind::OptimizerState);
}

class ZeroMemory : public ::testing::TestWithParam<int> {};

TEST_P(ZeroMemory, LedgerMatchesTheZeroFormulas) {
  const int stage = GetParam();
  torch::manual_seed(7);
  auto model = models::GPT2(models::GPT2Config::preset("tiny"));
  int64_t psi = 0;
  std::vector<int64_t> sizes;
  for (const auto& p : model->parameters()) {
    psi += p.numel();
    sizes.push_back(p.numel());
  }
  const int64_t bucket = 4096;
  auto engine = initialize(model, nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": 1, "bf16": {{"enabled": true}},
      "data_types": {{"compute_dtype": "bf16", "grad_accum_dtype": "bf16"}},
      "optimizer": {{"type": "Adam"}},
      "zero_optimization": {{"stage": {}, "reduce_bucket_size": {}, "stage3_param_persistence_threshold": 0}} }})",
                                                                      stage, bucket)));
  const int n = engine.world_size();
  // Padded counts as the partition arithmetic lays them out (one flat group: one param group, bf16).
  const int64_t group = (psi + 15) / 16 * 16;  // stage 0: 16-element alignment
  const int64_t lcm = std::lcm<int64_t>(16, 2 * n);
  const int64_t partitioned = (psi + lcm - 1) / lcm * lcm;  // stages 1-2
  int64_t shards = 0;                                     // stage 3: Σ ceil(numel / N)
  for (int64_t s : sizes) shards += zero::shard_parameter(s, n).shard_size;
  int64_t largest = 0;
  for (int64_t s : sizes) largest = std::max(largest, s);
  // Live gradient buckets (stage 3 overlaps communication by default: one filling, two in flight),
  // each its packed gradients plus their per-rank packing, 2 bytes per element; a bucket may hold
  // one parameter larger than reduce_bucket_size.
  const double live = stage == 3 ? 3.0 : 1.0;
  const double buckets = live * 2.0 * 2.0 * std::max<int64_t>(bucket, largest);

  Expected want{};
  switch (stage) {
    case 0: want = {2.0 * group, 2.0 * group, 12.0 * group, 0}; break;
    case 1: want = {2.0 * partitioned, 2.0 * partitioned, 12.0 * partitioned / n, 0}; break;
    case 2: want = {2.0 * partitioned, 2.0 * partitioned / n, 12.0 * partitioned / n, -1}; break;
    case 3: want = {2.0 * shards, 2.0 * shards, 12.0 * shards, -1}; break;
  }
  const auto& m = engine.memory();
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Params), static_cast<uint64_t>(want.params)) << engine.memory_report();
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Grads), static_cast<uint64_t>(want.grads)) << engine.memory_report();
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Master) + m.bytes(Tier::Device, MemKind::OptimizerState),
            static_cast<uint64_t>(want.master_and_state))
      << engine.memory_report();
  if (want.buffers < 0) {
    EXPECT_GT(m.bytes(Tier::Device, MemKind::Buffers), 0u);
    EXPECT_LE(m.bytes(Tier::Device, MemKind::Buffers), static_cast<uint64_t>(buckets) + 8192u)  // + module buffers
        << engine.memory_report();
  }
  EXPECT_EQ(m.tier_total(Tier::Cpu) + m.tier_total(Tier::Nvme), 0u);

  // The same against the raw formula on Ψ (padding is < 1% here).
  const double formula[] = {16.0 * psi, 4.0 * psi + 12.0 * psi / n, 2.0 * psi + 14.0 * psi / n, 16.0 * psi / n};
  EXPECT_NEAR(double(model_state_bytes(m)) / formula[stage], 1.0, 0.01) << engine.memory_report();

  // Training steps do not change the steady-state counts (stage 3 releases what it gathers).
  auto idx = torch::randint(0, 256, {1, 16}, torch::kLong);
  const uint64_t before = model_state_bytes(m);
  for (int s = 0; s < 2; ++s) {
    engine.backward(engine.forward(idx, idx));
    engine.step();
  }
  EXPECT_EQ(model_state_bytes(m), before) << engine.memory_report();
}

INSTANTIATE_TEST_SUITE_P(Stage, ZeroMemory, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

TEST_P(ZeroMemory, CpuOffloadLeavesOnly16BitStatesOnTheDevice) {
  // offload_optimizer cpu: the device tier keeps 16-bit parameters (and, at stage 1, the full
  // 16-bit gradients); the CPU tier holds KΨ/N of master + moments and the fp32 gradient partition.
  const int stage = GetParam();
  if (stage == 0) GTEST_SKIP() << "offload needs stage >= 1";
  torch::manual_seed(7);
  auto model = models::GPT2(models::GPT2Config::preset("tiny"));
  std::vector<int64_t> sizes;
  int64_t psi = 0;
  for (const auto& p : model->parameters()) {
    psi += p.numel();
    sizes.push_back(p.numel());
  }
  auto engine = initialize(model, nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": 1, "bf16": {{"enabled": true}},
      "data_types": {{"compute_dtype": "bf16", "grad_accum_dtype": "bf16"}}, "optimizer": {{"type": "Adam"}},
      "zero_optimization": {{"stage": {}, "stage3_param_persistence_threshold": 0,
                             "offload_optimizer": {{"device": "cpu"}}}} }})", stage)));
  const int n = engine.world_size();
  const int64_t lcm = std::lcm<int64_t>(16, 2 * n);
  const int64_t partitioned = (psi + lcm - 1) / lcm * lcm;
  int64_t shards = 0;
  for (int64_t s : sizes) shards += zero::shard_parameter(s, n).shard_size;
  const int64_t local = stage == 3 ? shards : partitioned / n;  // this rank's optimizer span
  const auto& m = engine.memory();
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Params), uint64_t(2 * (stage == 3 ? shards : partitioned))) << engine.memory_report();
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Grads), stage == 1 ? uint64_t(2 * partitioned) : 0u) << engine.memory_report();
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Master) + m.bytes(Tier::Device, MemKind::OptimizerState), 0u);
  EXPECT_EQ(m.bytes(Tier::Cpu, MemKind::Master), uint64_t(4 * local)) << engine.memory_report();
  EXPECT_EQ(m.bytes(Tier::Cpu, MemKind::OptimizerState), uint64_t(8 * local)) << engine.memory_report();
  EXPECT_EQ(m.bytes(Tier::Cpu, MemKind::Grads), uint64_t(4 * local)) << engine.memory_report();
}

struct EstimateCase {
  int stage;
  std::string precision;  // extra top-level config
  std::string zero;       // extra zero_optimization keys
};

class EstimateMatchesEngine : public ::testing::TestWithParam<EstimateCase> {};

TEST_P(EstimateMatchesEngine, EveryTierAndKind) {
  // zero::estimate_model_states (what ds-estimate prints and the RAM check uses) equals the bytes a
  // real engine holds, tier by tier and kind by kind, at this world size.
  const auto& c = GetParam();
  torch::manual_seed(7);
  auto model = models::GPT2(models::GPT2Config::preset("tiny"));
  std::vector<int64_t> numels;
  for (const auto& p : model->parameters()) numels.push_back(p.numel());
  std::string zero_keys = c.zero;  // "NVME": a swap folder of this world size's own
  const auto nvme = std::filesystem::temp_directory_path() / fmt::format("ds_estimate_w{}", comm::launcher_world_size());
  std::filesystem::create_directories(nvme);
  for (size_t at; (at = zero_keys.find("NVME")) != std::string::npos;) zero_keys.replace(at, 4, nvme.string());
  auto engine = initialize(model, nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": 1, "optimizer": {{"type": "AdamW"}} {},
      "zero_optimization": {{"stage": {}, "reduce_bucket_size": 5000, "stage3_param_persistence_threshold": 300 {}}} }})",
                                                                      c.precision, c.stage, zero_keys)));
  zero::EstimateInput in;
  in.param_numels = numels;
  in.world = engine.world_size();
  in.plan = engine.dtypes();
  in.config = &engine.config();
  const MemoryLedger want = zero::estimate_model_states(in);
  const MemoryLedger& got = engine.memory();
  for (Tier t : {Tier::Device, Tier::Cpu, Tier::Nvme})
    for (MemKind k : {MemKind::Params, MemKind::Grads, MemKind::Master, MemKind::OptimizerState, MemKind::Buffers})
      EXPECT_EQ(got.bytes(t, k), want.bytes(t, k)) << to_string(t) << " " << to_string(k) << "\nengine:\n"
                                                    << got.table() << "estimate:\n" << want.table();
}

INSTANTIATE_TEST_SUITE_P(
    Configs, EstimateMatchesEngine,
    ::testing::Values(EstimateCase{0, "", ""}, EstimateCase{1, "", ""}, EstimateCase{2, "", ""}, EstimateCase{3, "", ""},
                      EstimateCase{0, R"(, "bf16": {"enabled": true})", ""},
                      EstimateCase{1, R"(, "bf16": {"enabled": true})", ""},
                      EstimateCase{2, R"(, "bf16": {"enabled": true})", R"(, "overlap_comm": true)"},
                      EstimateCase{3, R"(, "bf16": {"enabled": true})", ""},
                      EstimateCase{1, R"(, "fp16": {"enabled": true})", R"(, "offload_optimizer": {"device": "cpu"})"},
                      EstimateCase{2, R"(, "fp16": {"enabled": true})", R"(, "offload_optimizer": {"device": "cpu"})"},
                      EstimateCase{3, "", R"(, "offload_optimizer": {"device": "cpu"})"},
                      // ZeRO-Infinity: shards, master and moments on the nvme tier, swap buffers on cpu.
                      EstimateCase{3, R"(, "bf16": {"enabled": true})",
                                   R"(, "offload_param": {"device": "nvme", "nvme_path": "NVME"},
                                      "offload_optimizer": {"device": "nvme", "nvme_path": "NVME", "buffer_count": 9,
                                                            "pipeline_read": true, "pipeline_write": true},
                                      "sub_group_size": 7000)"},
                      EstimateCase{3, "", R"(, "offload_param": {"device": "cpu"})"}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// zero::stage3_peak_gathered_numel (ds-estimate's "stage-3 step" column) equals the most parameter
// elements a real stage-3 engine held gathered at once over a few steps with activation checkpointing
// on or off: the whole model (less persistent parameters) at DeepSpeed's default
// stage3_max_reuse_distance; at 0 one block plus the tied wte (held until embed's backward); at
// 200000 two blocks plus wte.
TEST(Stage3StepEstimate, EqualsTheEnginesPeakGathered) {
  for (const char* extra : {"", R"(, "stage3_max_reuse_distance": 0)", R"(, "stage3_model_persistence_threshold": 0)", R"(, "stage3_max_reuse_distance": 200000)"})
    for (bool checkpointing : {false, true}) {
      torch::manual_seed(7);
      auto model = models::GPT2(models::GPT2Config::preset("tiny"));
      auto engine = initialize(model, nlohmann::json::parse(fmt::format(R"({{
          "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "optimizer": {{"type": "AdamW"}} {},
          "zero_optimization": {{"stage": 3, "stage3_param_persistence_threshold": 300 {}}} }})",
                                                                        checkpointing ? R"(, "activation_checkpointing": {})" : "", extra)));
      auto idx = torch::randint(0, 256, {2, 16});
      for (int step = 0; step < 3 * 2; ++step) {
        engine.backward(engine.forward(idx, idx));
        engine.step();
      }
      zero::Stage3StepInput in;
      std::map<std::string, size_t> id;
      for (const auto& p : model->named_parameters()) {
        id.emplace(p.key(), in.param_numels.size());
        in.param_numels.push_back(p.value().numel());
      }
      for (const auto& layer : model->layers()) {
        in.layer_params.emplace_back();
        for (const auto& name : layer.param_names) in.layer_params.back().push_back(id.at(name));
      }
      const auto& z3 = dynamic_cast<const zero::ShardedStates&>(engine.model_states());
      EXPECT_EQ(zero::stage3_peak_gathered_numel(in, engine.config().zero_optimization),
                z3.parameters().peak_live_numel())
          << "zero_optimization keys: \"" << extra << "\", activation checkpointing " << checkpointing;
    }
}

TEST(Stage3Sharding, ReleasedParametersHoldOnlyAPlaceholder) {
  torch::manual_seed(7);
  auto model = models::GPT2(models::GPT2Config::preset("tiny"));
  auto engine = initialize(model, nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 1,
      "optimizer": {"type": "Adam"}, "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})"));
  auto& w = model->transformer->wte->weight;
  EXPECT_EQ(w.sizes(), (std::vector<int64_t>{256, 64}));  // the shape is kept
  EXPECT_EQ(w.storage().nbytes(), sizeof(float));          // one element: the NaN placeholder
  EXPECT_TRUE(std::isnan(w.reshape({-1})[0].item<float>()));
  {
    zero::GatheredParameters g(engine, {"transformer.wte.weight"});
    EXPECT_EQ(w.storage().nbytes(), 256 * 64 * sizeof(float));
    EXPECT_TRUE(torch::isfinite(w).all().item<bool>());
  }
  EXPECT_EQ(w.storage().nbytes(), sizeof(float));  // released again when the guard ends
}

}  // namespace
}  // namespace ds
