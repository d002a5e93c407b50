// Ulysses sequence parallelism ("sequence_parallel_size": N, issue 16) against the one-process plain
// LibTorch loop over the same global batch: GPT-2 tiny (4 heads) and a 4-layer 8-head GPT, fp32,
// AdamW, clipping active on every step, 20 steps. Every rank of a sequence group is given the whole
// batch and computes 1/N of each sequence; DistributedAttention all-to-alls q, k, v to whole
// sequences of N-th of the heads. Under mpirun -np 2: SP=2 with ZeRO 0-3, Llama (GQA) and OPT;
// -np 4: SP=2 x DP=2 with ZeRO 0-3, SP=4 (8 heads) and AutoTP 2 x SP 2. Losses (the group's mean
// over every token) and every final parameter are within 1e-5 of the reference. Also: plain SGD
// without clipping (the gradient's scale), bf16 within 5%, the states' bytes against ds-estimate's
// arithmetic, a checkpoint saved at SP=2 resumed at SP=1 x DP=2, and the refusals. At world 1 they
// are skipped.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "models/gpt2.h"
#include "models/pretrained.h"
#include "models/token_data.h"
#include "parallel_equivalence.h"
#include "parallel/topology.h"
#include "parallel/ulysses.h"
#include "util/error.h"
#include "util/memory_ledger.h"
#include "zero/gathered_parameters.h"
#include "zero/memory_estimate.h"

namespace ds {
namespace {

std::string sp_config(int stage, int sp, int tp = 1, partest::Optimizer how = {}, int micro = partest::kMicro) {
  return partest::engine_config(stage, tp, sp, how, micro);
}

void sp_expect_matches_reference(const std::string& which, int stage, int sp, int tp = 1, partest::Optimizer how = {}) {
  const int world = comm::launcher_world_size();
  const int dp = world / sp / tp;
  const partest::Reference ref = partest::reference(which, dp, partest::kSteps, how);

  auto model = partest::make_model(which);
  auto engine = initialize(model, load_config_text(sp_config(stage, sp, tp, how), world, "<ulysses test>"));
  ASSERT_EQ(engine.topology().sequence().size(), sp);
  ASSERT_EQ(engine.topology().data().size(), dp);
  ASSERT_TRUE(model->sequence_parallel());
  const int d = engine.topology().data().rank();
  partest::train_like_reference(engine, ref, d, dp, 1e-5, fmt::format("{} stage {} sp {} tp {}", which, stage, sp, tp));
  EXPECT_LT(ref.losses[0].back(), ref.losses[0].front() - 0.2) << "the reference itself should learn";

  // Parameters are replicated over the sequence group: gathered, each is the reference's (AutoTP's
  // slices are left to the AutoTP test).
  zero::GatheredParameters full(engine);
  for (const auto& p : model->named_parameters()) {
    const torch::Tensor& want = ref.params.at(p.key());
    if (p.value().sizes() != want.sizes()) continue;  // a TP slice (the AutoTP test checks slices)
    const double diff = (p.value().detach() - want).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5) << which << " stage " << stage << " sp " << sp << ": " << p.key();
  }
}

class Ulysses : public ::testing::TestWithParam<int> {};

TEST_P(Ulysses, SequenceParallelTimesDataParallelMatchesThePlainLoop) {
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a sequence-parallel group of 2 (mpirun -np 2 or 4)";
  sp_expect_matches_reference("tiny", GetParam(), 2);  // world 4: SP 2 x DP 2
}

INSTANTIATE_TEST_SUITE_P(ZeroStages, Ulysses, ::testing::Values(0, 1, 2, 3));

TEST(UlyssesShapes, EightHeadsFourLayersAtTheWholeWorld) {
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a sequence-parallel group (mpirun -np 2 or 4)";
  sp_expect_matches_reference("deep", 2, comm::launcher_world_size());
}

TEST(UlyssesShapes, GradientScaleUnderSgdWithoutClipping) {
  // The token mean's gradient, summed over the sequence group and averaged over data x sequence, is
  // the plain loop's: any factor off (N, 1/N) changes every SGD update.
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a sequence-parallel group of 2 (mpirun -np 2 or 4)";
  sp_expect_matches_reference("tiny", 2, 2, 1, {.sgd = true});
}

TEST(UlyssesFamilies, LlamaWithGqaAndOptMatchThePlainLoop) {
  // Llama: rotary positions of this rank's tokens, kv heads 2 → 1 per rank; OPT: learned positions
  // at their offset.
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a sequence-parallel group of 2 (mpirun -np 2 or 4)";
  sp_expect_matches_reference("llama", 1, 2);
  sp_expect_matches_reference("opt", 3, 2);
}

TEST(UlyssesFamilies, GqaKvHeadsMustDivideTheGroup) {
  if (!partest::world_is({4})) GTEST_SKIP() << "runs at mpirun -np 4 (2 kv heads over 4 ranks)";
  std::string what = "(no error)";
  try {
    auto engine = initialize(partest::make_model("llama"), load_config_text(sp_config(0, 4), 4, "<t>"));
  } catch (const ConfigError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("sequence_parallel_size: the attention's 2 (key/value) heads per rank"), std::string::npos)
      << what;
}

TEST(UlyssesShapes, ComposesWithAutoTp) {
  // TP 2 x SP 2: each rank computes 4 of the 8 heads' projections and attends 2 of them over the
  // whole sequence.
  if (!partest::world_is({4})) GTEST_SKIP() << "runs at mpirun -np 4";
  sp_expect_matches_reference("deep", 1, 2, 2);
}

TEST(UlyssesPrecision, Bf16TracksTheFp32Loop) {
  // bf16 parameters and activations (fp32 master): every step's loss within 5% of the fp32
  // reference, the bound EnginePrecision.Bf16TracksFp32 holds the one-rank engine to.
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a sequence-parallel group of 2 (mpirun -np 2 or 4)";
  partest::expect_bf16_tracks_fp32(1, 2);
}

TEST(UlyssesPrecision, GradientsReduceInSeqParallelCommunicationDataType) {
  // DeepSpeed's engine puts seq_parallel_communication_data_type (default fp32) in place of
  // communication_data_type under sequence parallelism: a bf16 run's gradient exchange moves fp32
  // unless the key says bf16, and communication_data_type alone does not change it.
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a sequence-parallel group of 2 (mpirun -np 2 or 4)";
  const int world = comm::launcher_world_size();
  const auto data = partest::corpus();
  const models::BatchSampler sampler(data, partest::kSeqLen, 7);
  auto gradient_bytes = [&](const std::string& keys, torch::ScalarType expected) {
    std::string cfg = partest::engine_config(2, 1, 2);
    cfg.insert(1, R"("bf16": {"enabled": true}, )" + keys);
    auto engine = initialize(partest::make_model("tiny"), load_config_text(cfg, world, "<sp communication dtype>"));
    EXPECT_EQ(engine.dtypes().communication, expected) << keys;
    for (int m = 0; m < partest::kGas; ++m) {
      const auto b = partest::batch_for(sampler, 0, m, 0, 1);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    int64_t bytes = 0;
    for (const auto& t : engine.topology().data_parallel().collective_log().totals())
      if (t.tag.ends_with("_gradients")) bytes += t.wire_bytes;
    return bytes;
  };
  const int64_t fp32 = gradient_bytes("", torch::kFloat32);
  EXPECT_GT(fp32, 0);
  EXPECT_EQ(gradient_bytes(R"("communication_data_type": "bf16", )", torch::kFloat32), fp32);
  EXPECT_EQ(2 * gradient_bytes(R"("seq_parallel_communication_data_type": "BF16", )", torch::kBFloat16), fp32);
  gradient_bytes(R"("seq_parallel_communication_data_type": null, )", torch::kBFloat16);  // the training dtype
}

TEST(UlyssesPieces, AllToAllsAreInversesAndKeepTokenOrder) {
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a sequence group";
  const std::shared_ptr<comm::Communicator> held = comm::make_communicator(comm::Backend::Auto);
  comm::Communicator& world = *held;
  const int n = world.size(), r = world.rank();
  // Every rank builds the same whole [B,H,T,D] and keeps its token block.
  auto whole = torch::arange(2 * 4 * 8 * 3, torch::kFloat).view({2, 4, 8, 3});
  auto mine = parallel::shard_sequence(whole, world, 2);
  auto heads = parallel::sequence_to_heads(mine, world);  // [2, 4/n, 8, 3]: every token of this rank's heads
  EXPECT_TRUE(torch::equal(heads, whole.narrow(1, r * (4 / n), 4 / n)));
  EXPECT_TRUE(torch::equal(parallel::heads_to_sequence(heads, world), mine));
  EXPECT_TRUE(torch::equal(parallel::sequence_positions(8, world, torch::kCPU), torch::arange(r * (8 / n), (r + 1) * (8 / n))));
}

TEST(UlyssesMemory, StatesArePartitionedOverDataTimesSequenceAsTheEstimateSays) {
  // ds-estimate's arithmetic under Ulysses (ZeRO over data_parallel_size x sequence_parallel_size:
  // the states stay whole, partitioned over every rank) against the ledger of real SP engines.
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a sequence-parallel group of 2 (mpirun -np 2 or 4)";
  for (int stage : {0, 1, 2, 3}) {
    const Config cfg = load_config_text(sp_config(stage, 2), comm::launcher_world_size(), "<t>");
    zero::EstimateInput in;
    in.param_numels = partest::gpt2_shape("tiny").parameter_sizes(1);
    in.world = cfg.data_parallel_size * cfg.parallel_sizes.sequence_parallel_size;
    auto engine = initialize(partest::make_model("tiny"), cfg);
    in.plan = engine.dtypes();
    in.config = &engine.config();
    EXPECT_EQ(in.world, comm::launcher_world_size());
    const MemoryLedger want = zero::estimate_model_states(in);
    for (MemKind k : {MemKind::Params, MemKind::Grads, MemKind::Master, MemKind::OptimizerState, MemKind::Buffers})
      EXPECT_EQ(engine.memory().bytes(Tier::Device, k), want.bytes(Tier::Device, k))
          << "stage " << stage << " " << to_string(k) << "\nengine:\n" << engine.memory().table() << "estimate:\n"
          << want.table();
  }
}

TEST(UlyssesCheckpoint, ResumesWithoutSequenceParallelismOnTheSameGlobalBatch) {
  // Saved at SP=2 (DP=1, micro-batch 2), loaded at SP=1 x DP=2 (micro-batch 1: each rank one of the
  // two sequences): the states are whole and partitioned like data parallelism's, so the two runs
  // continue with the same parameters.
  if (!partest::world_is({2})) GTEST_SKIP() << "runs at mpirun -np 2";
  const std::string dir = ::testing::TempDir() + "ulysses_ckpt";
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  auto sp_model_a = partest::make_model("tiny");
  auto a = initialize(sp_model_a, load_config_text(sp_config(2, 2), 2, "<sp 2>"));
  auto train = [&](auto& engine, int step, bool whole) {
    for (int m = 0; m < partest::kGas; ++m) {
      auto b = partest::batch_for(sampler, step, m, 0, 1);
      auto in = whole ? b.inputs : b.inputs.narrow(0, engine.rank(), 1);
      auto tg = whole ? b.targets : b.targets.narrow(0, engine.rank(), 1);
      engine.backward(engine.forward(in, tg));
      engine.step();
    }
  };
  for (int step = 0; step < 3; ++step) train(a, step, true);
  a.save_checkpoint(dir);
  for (int step = 3; step < 5; ++step) train(a, step, true);

  auto tiny = partest::make_model("tiny");
  {
    torch::NoGradGuard no_grad;
    for (auto& p : tiny->parameters()) p.add_(1.0);  // everything must come from the checkpoint, not the seed
  }
  auto b = initialize(tiny, load_config_text(sp_config(2, 1, 1, {}, 1), 2, "<dp 2>"));
  ASSERT_EQ(b.topology().sequence().size(), 1);
  ASSERT_TRUE(b.load_checkpoint(dir).has_value());
  for (int step = 3; step < 5; ++step) train(b, step, false);
  zero::GatheredParameters full_a(a), full_b(b);
  auto pa = sp_model_a->named_parameters(), pb = tiny->named_parameters();
  for (const auto& item : pa)
    EXPECT_LE((item.value() - pb[item.key()]).abs().max().item<double>(), 1e-5) << item.key();
  b.communicator().barrier();
  if (b.rank() == 0) std::filesystem::remove_all(dir);
}

// --- refusals: each names sequence_parallel_size and the cause; a group given different batches is
// stopped at the first forward ---

std::string sp_init_error(std::shared_ptr<torch::nn::Module> model, int sp) {
  try {
    auto engine = Engine(std::move(model), load_config_text(sp_config(0, sp), comm::launcher_world_size(), "<t>"));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(UlyssesRefusals, HeadsModelsAndSequencesThatCannotBeSplit) {
  if (!partest::world_is({2})) GTEST_SKIP() << "runs at mpirun -np 2";
  models::GPT2Config three_heads = partest::gpt2_shape("tiny");
  three_heads.n_embd = 48;
  three_heads.n_head = 3;
  std::string what = sp_init_error(models::GPT2(three_heads).ptr(), 2);
  EXPECT_NE(what.find("sequence_parallel_size: the attention's 3 (key/value) heads per rank"), std::string::npos) << what;

  auto plain = std::make_shared<torch::nn::Module>();
  plain->register_module("fc1", torch::nn::Linear(8, 8));
  what = sp_init_error(plain, 2);
  EXPECT_NE(what.find("sequence_parallel_size: 2 needs a model whose attention can run as DistributedAttention"),
            std::string::npos)
      << what;

  auto model = partest::make_model("tiny");
  auto engine = initialize(model, load_config_text(sp_config(1, 2), 2, "<t>"));
  auto data = partest::corpus();
  models::BatchSampler odd(data, 15, 7);  // 15 tokens do not split over 2 ranks
  auto b = odd.batch(0, partest::kMicro);
  try {
    engine.forward(b.inputs, b.targets);
    ADD_FAILURE() << "a 15-token sequence was split over 2 ranks";
  } catch (const ConfigError& e) {
    what = e.what();
    EXPECT_NE(what.find("sequence_parallel_size: the sequence length 15 does not split over a sequence-parallel "
                        "group of 2 ranks"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(model->set_sequence_layout(models::SequenceLayout::from_segments(torch::zeros({1, 16}, torch::kLong),
                                                                                torch::zeros({1, 16}, torch::kLong))),
               NotSupported);

  // A loader sharded by world rank gives the two ranks of the sequence group different batches.
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  b = sampler.batch(int64_t{engine.rank()} * partest::kMicro, partest::kMicro);
  try {
    engine.forward(b.inputs, b.targets);
    ADD_FAILURE() << "different batches on the ranks of a sequence-parallel group were accepted";
  } catch (const Error& e) {
    what = e.what();
    EXPECT_NE(what.find("forward argument 0 differs across the"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace ds
