// AutoTP training ("tensor_parallel": {"autotp_size": N}, issue 16) against the one-process plain
// LibTorch loop over the same global batch: GPT-2 tiny (4 heads) and a 4-layer 8-head GPT, fp32,
// AdamW, clipping active on every step, 20 steps. Under mpirun -np 2: TP=2 (ZeRO 0-3 over a
// data-parallel world of 1); -np 4: TP=2 x DP=2 with ZeRO 0, 1, 2 and 3, and TP=4; Llama (GQA) and
// OPT at TP=2. Each rank's losses and its slice of every final parameter are within 1e-5 of the
// reference, and so is the whole model save_16bit_model writes. A checkpoint saved at TP=2 x DP=2
// resumes at TP=1 x DP=4 (ZeRO 2) and TP=4 x DP=1 (ZeRO 3) on the reference's trajectory, and
// ds-zero-to-fp32 exports it as the whole model. At world 1 they are skipped.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "../log_capture.h"
#include "format/safetensors.h"
#include "models/gpt2.h"
#include "models/pretrained.h"
#include "models/token_data.h"
#include "parallel_equivalence.h"
#include "parallel/tp_linear.h"
#include "parallel/topology.h"
#include "parallel/vocab_range.h"
#include "util/error.h"
#include "util/memory_ledger.h"
#include "zero/gathered_parameters.h"
#include "zero/memory_estimate.h"

namespace ds {
namespace {

// `vocab_parallel`, `overlap`: tensor_parallel.vocab_parallel and tp_overlap_comm.
std::string tp_config(int stage, int tp, int micro = partest::kMicro, bool vocab_parallel = false, bool overlap = false) {
  std::string c = partest::engine_config(stage, tp, 1, {}, micro);
  if ((vocab_parallel || overlap) && tp > 1) {
    const std::string key = fmt::format(R"("autotp_size": {})", tp);
    c.replace(c.find(key), key.size(),
              key + (vocab_parallel ? R"(, "vocab_parallel": true)" : "") + (overlap ? R"(, "tp_overlap_comm": true)" : ""));
  }
  return c;
}

// This rank's slice of a reference parameter, cut as AutoTP cut the engine's: a column layer keeps
// slice r of each fused block (3 for c_attn) along the rows, a row layer slice r of the columns.
torch::Tensor tp_slice_like(const std::string& name, const torch::Tensor& full, const torch::Tensor& local, int tp, int r) {
  if (local.sizes() == full.sizes()) return full;  // replicated
  if (name == "transformer.wte.weight") {  // vocab-parallel: uneven ranges of whole rows
    const parallel::VocabRange rows = parallel::vocab_range(full.size(0), tp, r);
    return full.narrow(0, rows.begin, rows.size());
  }
  if (local.size(0) != full.size(0)) {
    const int64_t parts = name.find("c_attn") != std::string::npos ? 3 : 1;
    return parallel::column_slice(full, parts, tp, r, name, "rows");
  }
  return parallel::column_slice(full.t(), 1, tp, r, name, "columns").t();
}

// `split_per_layer`: how many parameters of each layer AutoTP cuts (GPT-2 6: c_attn w+b, attn.c_proj w,
// c_fc w+b, mlp.c_proj w; Llama 7: q/k/v/gate/up/o/down weights; OPT 10: q/k/v/fc1 w+b, out_proj/fc2 w).
// `vocab_parallel`: the embedding and tied head split too (one more split parameter).
void tp_expect_matches_reference(const std::string& which, int stage, int tp, int split_per_layer = 6,
                                 bool vocab_parallel = false, bool overlap = false) {
  const int world = comm::launcher_world_size();
  const int dp = world / tp;
  const partest::Reference ref = partest::reference(which, dp);

  auto model = partest::make_model(which);
  auto engine = initialize(model, load_config_text(tp_config(stage, tp, partest::kMicro, vocab_parallel, overlap), world,
                                                   "<auto_tp test>"));
  ASSERT_EQ(engine.topology().model().size(), tp);
  ASSERT_EQ(engine.topology().data_parallel().size(), dp);
  const int d = engine.topology().data_parallel().rank(), r = engine.topology().model().rank();
  partest::train_like_reference(engine, ref, d, dp, 1e-5, fmt::format("{} stage {} tp {}", which, stage, tp));
  EXPECT_LT(ref.losses[0].back(), ref.losses[0].front() - 0.2) << "the reference itself should learn";

  // save_16bit_model puts the slices back together: the file is the whole trained model.
  const std::filesystem::path out = ::testing::TempDir() + fmt::format("auto_tp_16bit_{}_{}_{}", which, stage, tp);
  {
    ds::test::LogCapture log;
    engine.save_16bit_model(out.string());
    // Stage 3 without gather_16bit_weights_on_model_save: DeepSpeed saves nothing; we save, and say so.
    if (engine.rank() == 0) {
      EXPECT_EQ(log.count("gather_16bit_weights_on_model_save is false"), stage == 3 ? 1 : 0) << log.text();
    }
  }
  {
    format::SafetensorsFile f((out / "model.safetensors").string());
    for (const auto& [name, want] : ref.params) {
      const auto& info = f.at(name);
      ASSERT_EQ(info.shape, want.sizes().vec()) << name;
      torch::Tensor got = torch::empty(info.shape, torch::kFloat32);
      f.read(info, got.data_ptr(), got.numel() * sizeof(float));
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-5) << which << " stage " << stage << ": saved " << name;
    }
  }
  engine.communicator().barrier();
  if (engine.rank() == 0) std::filesystem::remove_all(out);

  zero::GatheredParameters full(engine);  // stage 3: the whole of this rank's slices
  int split = 0;
  for (const auto& p : model->named_parameters()) {
    const torch::Tensor& want_full = ref.params.at(p.key());
    const torch::Tensor want = tp_slice_like(p.key(), want_full, p.value(), tp, r);
    split += want.sizes() != want_full.sizes();
    ASSERT_EQ(p.value().sizes(), want.sizes()) << p.key();
    const double diff = (p.value().detach() - want).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5) << which << " stage " << stage << " tp " << tp << ": " << p.key();
  }
  const int64_t layers = which == "llama" || which == "opt" ? 2 : partest::gpt2_shape(which).n_layer;
  EXPECT_EQ(split, layers * split_per_layer + (vocab_parallel ? 1 : 0)) << which << ": the parameters AutoTP cut";
}

class AutoTp : public ::testing::TestWithParam<int> {};

TEST_P(AutoTp, TensorParallelTimesDataParallelMatchesThePlainLoop) {
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a tensor-parallel group of 2 (mpirun -np 2 or 4)";
  tp_expect_matches_reference("tiny", GetParam(), 2);
}

INSTANTIATE_TEST_SUITE_P(ZeroStages, AutoTp, ::testing::Values(0, 1, 2, 3));

// The vocab-parallel embedding, tied head and loss (tensor_parallel.vocab_parallel) on a 257-token
// vocabulary, uneven over every group: TP=2 with ZeRO 1 and 3 (x DP=2 at -np 4), TP=4 with ZeRO 2;
// the ZeRO 3 and TP=4 runs with tp_overlap_comm too.
TEST(AutoTpVocab, SplitEmbeddingAndParallelLossMatchThePlainLoop) {
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a tensor-parallel group (mpirun -np 2 or 4)";
  tp_expect_matches_reference("vocab257", 1, 2, 6, /*vocab_parallel=*/true);
  tp_expect_matches_reference("vocab257", 3, 2, 6, /*vocab_parallel=*/true, /*overlap=*/true);
  if (comm::launcher_world_size() == 4) tp_expect_matches_reference("vocab257", 2, 4, 6, true, true);
}

TEST(AutoTpShapes, EightHeadsFourLayersAtTheWholeWorld) {
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a tensor-parallel group (mpirun -np 2 or 4)";
  tp_expect_matches_reference("deep", 1, comm::launcher_world_size());
}

TEST(AutoTpFamilies, LlamaWithGqaAndOptMatchThePlainLoop) {
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a tensor-parallel group of 2 (mpirun -np 2 or 4)";
  tp_expect_matches_reference("llama", 1, 2, 7);  // kv heads 2 → 1 per rank, q heads 4 → 2
  tp_expect_matches_reference("opt", 2, 2, 10);
}

TEST(AutoTpPrecision, Bf16TracksTheFp32Loop) {
  // bf16 parameters and activations (fp32 master) at TP=2: every step's loss within 5% of the fp32
  // reference, the bound EnginePrecision.Bf16TracksFp32 holds the one-rank engine to.
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a tensor-parallel group of 2 (mpirun -np 2 or 4)";
  partest::expect_bf16_tracks_fp32(2, 1);
}

TEST(AutoTpFamilies, GqaKvHeadsMustDivideTheGroup) {
  if (!partest::world_is({4})) GTEST_SKIP() << "runs at mpirun -np 4 (2 kv heads over 4 ranks)";
  try {
    auto engine = initialize(partest::make_model("llama"), load_config_text(tp_config(0, 4), 4, "<t>"));
    ADD_FAILURE() << "2 kv heads were cut over 4 tensor-parallel ranks";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer 'model.layers.0.self_attn.k_proj': out_features 16 does not split into 1 block(s) of "
                        "whole 8-wide heads over 4 tensor-parallel ranks"),
              std::string::npos)
        << what;
  }
}

TEST(AutoTpMemory, EstimateMatchesTheEngineAtEveryStage) {
  // ds-estimate's per-rank bytes under AutoTP (GPT2Config::parameter_sizes(tp), ZeRO over world / tp)
  // equal what a real TP engine holds, kind by kind.
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "needs a tensor-parallel group of 2 (mpirun -np 2 or 4)";
  // With the vocab-parallel embedding (257 rows: 129 + 128) the estimate is group rank 0's, the most
  // any rank holds.
  for (int stage : {0, 1, 2, 3})
    for (bool vocab : {false, true}) {
      auto engine = initialize(partest::make_model("vocab257"), load_config_text(tp_config(stage, 2, partest::kMicro, vocab),
                                                                                 comm::launcher_world_size(), "<t>"));
      zero::EstimateInput in;
      in.param_numels = partest::gpt2_shape("vocab257").parameter_sizes(2, vocab);
      in.world = engine.topology().data_parallel().size();
      in.plan = engine.dtypes();
      in.config = &engine.config();
      const MemoryLedger want = zero::estimate_model_states(in);
      const bool holds_most = !vocab || engine.topology().model().rank() == 0;
      for (MemKind k : {MemKind::Params, MemKind::Grads, MemKind::Master, MemKind::OptimizerState, MemKind::Buffers}) {
        const auto got = engine.memory().bytes(Tier::Device, k), est = want.bytes(Tier::Device, k);
        EXPECT_TRUE(holds_most ? got == est : got <= est)
            << "stage " << stage << (vocab ? " vocab-parallel " : " ") << to_string(k) << "\nengine:\n"
            << engine.memory().table() << "estimate:\n" << want.table();
      }
    }
}

// --- checkpoints hold whole tensors: saved at TP=2 x DP=2, they load at TP=1 x DP=4 and TP=4 x DP=1
// (each rank its slices of them), and ds-zero-to-fp32 exports the whole model ---

// `vocab_parallel`: saved, and resumed at TP=4, with the embedding split too.
void expect_resumes_at_other_tp_sizes(const std::string& which, bool vocab_parallel) {
  constexpr int kSaveAt = 3, kEnd = 5;
  const partest::Reference at_save = partest::reference(which, 2, kSaveAt), at_end = partest::reference(which, 2, kEnd);
  const std::filesystem::path dir = ::testing::TempDir() + "auto_tp_resume_" + which;
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  {
    auto model = partest::make_model(which);
    auto a = initialize(model, load_config_text(tp_config(1, 2, partest::kMicro, vocab_parallel), 4, "<tp 2 x dp 2>"));
    const int d = a.topology().data_parallel().rank();
    for (int step = 0; step < kSaveAt; ++step)
      for (int m = 0; m < partest::kGas; ++m) {
        auto b = partest::batch_for(sampler, step, m, d, 2);
        a.backward(a.forward(b.inputs, b.targets));
        a.step();
      }
    a.save_checkpoint(dir.string());
    if (a.rank() == 0) partest::expect_export_equals(dir.string(), at_save.params);  // the whole model at the save
    a.communicator().barrier();
  }
  // The same global batch (2 data-parallel ranks x micro 2 = samples 4k .. 4k+3) split another way.
  struct Resume {
    int tp, stage, micro;
  };
  for (const Resume r : {Resume{1, 2, 1}, Resume{4, 3, 4}}) {
    auto model = partest::make_model(which);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.add_(1.0);  // everything must come from the checkpoint
    }
    auto b = initialize(model, load_config_text(tp_config(r.stage, r.tp, r.micro, vocab_parallel), 4, "<resume>"));
    ASSERT_TRUE(b.load_checkpoint(dir.string()).has_value());
    const int d = b.topology().data_parallel().rank(), dp = b.topology().data_parallel().size();
    for (int step = kSaveAt; step < kEnd; ++step)
      for (int m = 0; m < partest::kGas; ++m) {
        auto whole = sampler.batch((int64_t{step} * partest::kGas + m) * 2 * partest::kMicro, 2 * partest::kMicro);
        const int64_t per = 2 * partest::kMicro / dp;
        b.backward(b.forward(whole.inputs.narrow(0, d * per, per), whole.targets.narrow(0, d * per, per)));
        b.step();
      }
    zero::GatheredParameters full(b);
    for (const auto& p : model->named_parameters()) {
      const torch::Tensor want = tp_slice_like(p.key(), at_end.params.at(p.key()), p.value(), r.tp,
                                               b.topology().model().rank());
      ASSERT_EQ(p.value().sizes(), want.sizes()) << p.key();
      EXPECT_LE((p.value().detach() - want).abs().max().item<double>(), 1e-5)
          << "resumed at TP=" << r.tp << " stage " << r.stage << ": " << p.key();
    }
    b.communicator().barrier();
    if (r.tp == 4 && b.rank() == 0) std::filesystem::remove_all(dir);
  }
}

TEST(AutoTpCheckpoint, ResumesAtAnotherTensorParallelSize) {
  if (!partest::world_is({4})) GTEST_SKIP() << "runs at mpirun -np 4";
  expect_resumes_at_other_tp_sizes("tiny", false);
}

TEST(AutoTpVocab, ResumesAtAnotherTensorParallelSize) {
  if (!partest::world_is({4})) GTEST_SKIP() << "runs at mpirun -np 4";
  expect_resumes_at_other_tp_sizes("vocab257", true);  // 129 + 128 rows saved; 65 + 64 + 64 + 64 loaded
}

// --- refusals: each names the key and the layer; a group given different batches is stopped at the
// first forward ---

std::string tp_init_error(std::shared_ptr<torch::nn::Module> model, int tp) {
  try {
    auto engine = Engine(std::move(model), load_config_text(tp_config(0, tp), comm::launcher_world_size(), "<t>"));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AutoTpRefusals, SizesModelsAndCheckpointsThatCannotBeSplit) {
  if (!partest::world_is({2})) GTEST_SKIP() << "runs at mpirun -np 2";
  models::GPT2Config three_heads = partest::gpt2_shape("tiny");
  three_heads.n_embd = 48;
  three_heads.n_head = 3;
  std::string what = tp_init_error(models::GPT2(three_heads).ptr(), 2);
  EXPECT_NE(what.find("tensor_parallel.autotp_size"), std::string::npos) << what;
  EXPECT_NE(what.find("transformer.h.0.attn.c_attn"), std::string::npos) << what;
  EXPECT_NE(what.find("whole 16-wide heads"), std::string::npos) << what;

  auto plain = std::make_shared<torch::nn::Module>();
  plain->register_module("fc1", torch::nn::Linear(8, 8));
  what = tp_init_error(plain, 2);
  EXPECT_NE(what.find("layer 'fc1' is a plain torch::nn::Linear"), std::string::npos) << what;

  auto no_linear = std::make_shared<torch::nn::Module>();
  no_linear->register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})));
  what = tp_init_error(no_linear, 2);
  EXPECT_NE(what.find("tensor_parallel.autotp_size: 2: the model has no layer AutoTP can split"), std::string::npos)
      << what;

  try {  // the vocab-parallel split needs a head tied to the embedding (GPT-2's)
    auto llama = initialize(partest::make_model("llama"), load_config_text(tp_config(0, 2, partest::kMicro, true), 2, "<t>"));
    ADD_FAILURE() << "a Llama model's vocabulary was split";
  } catch (const ConfigError& e) {
    what = e.what();
    EXPECT_NE(what.find("tensor_parallel.vocab_parallel: llama models have no vocab-parallel embedding"), std::string::npos)
        << what;
  }

  auto engine = initialize(partest::make_model("tiny"), load_config_text(tp_config(1, 2), 2, "<t>"));

  // A loader sharded by world rank gives the two ranks of the group different batches.
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  auto b = sampler.batch(int64_t{engine.rank()} * partest::kMicro, partest::kMicro);
  try {
    engine.forward(b.inputs, b.targets);
    ADD_FAILURE() << "different batches on the ranks of a tensor-parallel group were accepted";
  } catch (const Error& e) {
    what = e.what();
    EXPECT_NE(what.find("forward argument 0 differs across the tensor-parallel group"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace ds
