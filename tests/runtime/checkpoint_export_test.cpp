// ds-zero-to-fp32 and the Hugging Face GPT-2 layout: a ZeRO checkpoint exported (single file,
// sharded, bf16) loads back into a fresh GPT-2 with parameters equal to the engine's, and a
// Python reader that parses safetensors with json + numpy (no code of ours) finds the same values.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "checkpoint/state_files.h"
#include "models/gpt2.h"
#include "models/gpt2_hf.h"
#include "models/token_data.h"
#include "util/error.h"

namespace ds {
namespace {
namespace fs = std::filesystem;

struct Exported : ::testing::Test {
  static void SetUpTestSuite() {
    root = fs::temp_directory_path() / fmt::format("ds_export_{}", ::getpid());
    fs::create_directories(root);
    std::string text;
    for (int i = 0; i < 200; ++i) text += "all that glitters is not gold " + std::to_string(i) + ". ";
    auto data = models::TokenDataset::from_text(text);
    models::BatchSampler sampler(data, 32, 3);
    torch::manual_seed(3);
    auto engine = initialize(models::GPT2(models::GPT2Config::preset("tiny")), nlohmann::json::parse(R"({
        "train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
        "zero_optimization": {"stage": 2}})"));
    for (int s = 0; s < 3; ++s) {
      auto b = sampler.batch(s * 4, 4);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    const auto& c = engine.model().config();
    engine.save_checkpoint((root / "ckpt").string(), "", {{"model", {{"type", "gpt2"}, {"vocab_size", c.vocab_size},
                                                                      {"n_positions", c.n_positions}, {"n_embd", c.n_embd},
                                                                      {"n_layer", c.n_layer}, {"n_head", c.n_head}}}});
    std::vector<std::pair<std::string, torch::Tensor>> ref;
    for (const auto& p : engine.model().named_parameters()) {
      params.emplace_back(p.key(), p.value().detach().clone());
      ref.emplace_back(p.key(), p.value().detach().clone());
    }
    checkpoint::write_tensor_file((root / "engine_params.safetensors").string(), ref);
    engine.save_16bit_model((root / "16bit").string());
  }
  static void TearDownTestSuite() { fs::remove_all(root); }

  static int export_to(const std::string& out, const std::string& flags = "") {
    const std::string cmd = fmt::format("{}/tools/ds-zero-to-fp32 {} {} {} > {}/log.txt 2>&1", DS_BINARY_DIR,
                                        (root / "ckpt").string(), out, flags, root.string());
    return std::system(cmd.c_str());
  }

  static void expect_loads_equal(const std::string& path, torch::ScalarType dtype = torch::kFloat32) {
    torch::manual_seed(11);  // other weights: everything must come from the file
    models::GPT2 fresh(models::GPT2Config::preset("tiny"));
    models::load_hf_gpt2(*fresh, path);
    auto got = fresh->named_parameters();
    for (const auto& [name, want] : params)
      EXPECT_TRUE(torch::equal(got[name], want.to(dtype).to(torch::kFloat32))) << name;
  }

  static inline fs::path root;
  static inline std::vector<std::pair<std::string, torch::Tensor>> params;
};

TEST_F(Exported, SingleFileLoadsBackExactly) {
  ASSERT_EQ(export_to((root / "hf").string()), 0);
  EXPECT_TRUE(fs::exists(root / "hf" / "config.json"));
  format::SafetensorsFile f((root / "hf" / "model.safetensors").string());
  // HF's Conv1D layout: c_attn.weight is [in, out] = [64, 192].
  EXPECT_EQ(f.at("transformer.h.0.attn.c_attn.weight").shape, (std::vector<int64_t>{64, 192}));
  expect_loads_equal((root / "hf").string());
}

TEST_F(Exported, ShardedWithAnIndexLoadsBackExactly) {
  ASSERT_EQ(export_to((root / "sharded").string(), "--max-shard-size 100KB"), 0);
  ASSERT_TRUE(fs::exists(root / "sharded" / "model.safetensors.index.json"));
  std::ifstream in(root / "sharded" / "model.safetensors.index.json");
  auto index = nlohmann::json::parse(in);
  std::set<std::string> files;
  for (const auto& [name, file] : index.at("weight_map").items()) files.insert(file.get<std::string>());
  EXPECT_GT(files.size(), 2u);  // the tiny model is ~0.5 MB
  for (const auto& f : files) {
    EXPECT_TRUE(fs::exists(root / "sharded" / f)) << f;
    EXPECT_LE(fs::file_size(root / "sharded" / f), 100'000u + 4096u) << f;  // one tensor may pass alone
  }
  expect_loads_equal((root / "sharded").string());
}

TEST_F(Exported, Bf16ExportIsTheRoundedMaster) {
  ASSERT_EQ(export_to((root / "bf16").string(), "--dtype bf16"), 0);
  format::SafetensorsFile f((root / "bf16" / "model.safetensors").string());
  EXPECT_EQ(f.at("transformer.wte.weight").dtype, format::StDtype::BF16);
  expect_loads_equal((root / "bf16").string(), torch::kBFloat16);
}

TEST_F(Exported, PythonReadsTheSameValues) {
  ASSERT_EQ(export_to((root / "py").string()), 0);
  const std::string cmd = fmt::format("/usr/bin/python3 {}/tests/runtime/compare_hf_export.py {} {}", DS_SOURCE_DIR,
                                      (root / "py" / "model.safetensors").string(),
                                      (root / "engine_params.safetensors").string());
  const int rc = std::system(cmd.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) GTEST_SKIP() << "python3-numpy is not installed";
  EXPECT_EQ(rc, 0) << cmd;
}

TEST_F(Exported, Save16BitModelHoldsEveryParameter) {
  format::SafetensorsFile f((root / "16bit" / "model.safetensors").string());
  EXPECT_EQ(f.tensors().size(), params.size());
  for (const auto& [name, want] : params) {
    const auto& info = f.at(name);
    torch::Tensor got = torch::empty(info.shape, torch::kFloat32);
    f.read(info, got.data_ptr(), info.nbytes());
    EXPECT_TRUE(torch::equal(got, want)) << name;  // fp32 run: the model dtype is fp32
  }
}

TEST_F(Exported, ErrorsNameTheCause) {
  EXPECT_NE(export_to((root / "x").string(), "--max-shard-size lots"), 0);
  const std::string cmd = fmt::format("{}/tools/ds-zero-to-fp32 {} {} > /dev/null 2>&1", DS_BINARY_DIR,
                                      (root / "nowhere").string(), (root / "y").string());
  EXPECT_NE(std::system(cmd.c_str()), 0);
  models::GPT2Config other = models::GPT2Config::preset("tiny");
  other.n_embd = 32;
  models::GPT2 wrong(other);
  ASSERT_EQ(export_to((root / "hf2").string()), 0);
  try {
    models::load_hf_gpt2(*wrong, (root / "hf2").string());
    ADD_FAILURE() << "a GPT-2 of another width loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds
