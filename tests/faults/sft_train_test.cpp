// ds-train --model-dir DIR --data FILE.jsonl end to end (docs/fine-tuning-data.md): a tiny Llama and
// the toy byte-level tokenizer written here, trained on examples/fine_tuning/train.jsonl (all three
// record shapes) packed and padded — the loss falls; bad input stops before training, naming it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "../data/sft_test_util.h"
#include "faults_test_util.h"
#include "models/pretrained.h"

namespace ds::faults {
namespace {

// A tiny Hugging Face folder: config.json + model.safetensors of `config`, and the toy tokenizer.
std::string write_model(const TempDir& dir, nlohmann::json config) {
  const std::string m = dir.file(config["model_type"].get<std::string>());
  torch::manual_seed(0);
  models::save_pretrained(*models::from_config(config), m);
  data::test::write_toy_tokenizer(m);
  return m;
}

nlohmann::json tiny_llama() {
  return {{"model_type", "llama"},     {"vocab_size", 272},        {"hidden_size", 32},
          {"intermediate_size", 64},   {"num_hidden_layers", 2},   {"num_attention_heads", 2},
          {"num_key_value_heads", 1},  {"max_position_embeddings", 128}};
}

std::string sft_train(const std::string& model, const std::string& args, int steps = 8) {
  return tool("ds-train") + " --model-dir " + model + " --progress off --steps " + std::to_string(steps) + " " + args;
}

// "loss A -> B" from ds-train's last line.
std::pair<double, double> losses(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("loss ([0-9.]+) -> ([0-9.]+)"))) return {0, 0};
  return {std::stod(m[1]), std::stod(m[2])};
}

std::string small_config(const TempDir& dir) {  // small micro-batches, a brisk lr: a quick test
  const std::string config = dir.file("ds_config.json");
  write_text(config, R"({"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "betas": [0.9, 0.95], "weight_decay": 0.0}}})");
  return config;
}

TEST(SftTrain, PackedAndPaddedLossFalls) {
  TempDir dir("sft");
  const std::string model = write_model(dir, tiny_llama());
  const std::string data = source_path("examples/fine_tuning/train.jsonl");
  const std::string config = small_config(dir);
  for (const std::string mode : {"--pack", "--pad"}) {
    const auto r = run(sft_train(model, "--data " + data + " --max-seq-len 128 --config " + config + " " + mode));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::printf("%s", r.output.c_str());  // the figures, for the log
    EXPECT_NE(r.output.find("38 examples (text 8, prompt/completion 12, messages 18)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(mode == "--pack" ? "packed rows" : "padded rows"), std::string::npos) << r.output;
    auto [first, last] = losses(r.output);
    EXPECT_GT(first, 4.0) << r.output;        // about ln(272) untrained
    EXPECT_LT(last, 0.85 * first) << r.output;  // and it learns (5.62 -> 3.80 measured)
  }
}

// The sampler is addressed by step: 4 steps, saved, resumed to 8 read the batches 8 straight steps
// read, so the last loss is the same.
TEST(SftTrain, ResumeContinuesWithTheSameBatches) {
  TempDir dir("sft_resume");
  const std::string model = write_model(dir, tiny_llama());
  const std::string args = "--data " + source_path("examples/fine_tuning/train.jsonl") + " --max-seq-len 128 --config " +
                           small_config(dir);
  const auto straight = run(sft_train(model, args, 8));
  const auto first = run(sft_train(model, args + " --save " + dir.file("ckpt"), 4));
  const auto resumed = run(sft_train(model, args + " --load " + dir.file("ckpt"), 8));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at global step 4"), std::string::npos) << resumed.output;
  EXPECT_EQ(losses(resumed.output).second, losses(straight.output).second) << straight.output << resumed.output;
}

TEST(SftTrain, BadInputStopsBeforeTrainingNamingIt) {
  TempDir dir("sft_bad");
  const std::string model = write_model(dir, tiny_llama());
  const std::string data = dir.file("bad.jsonl");
  write_text(data, "{\"text\": \"fine\"}\n{\"prompt\": \"p\", \"completion\": 5}\n");
  auto r = run(sft_train(model, "--data " + data));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(data + ":2: field 'completion': must be a string"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("done:"), std::string::npos) << r.output;

  r = run(sft_train(model, "--data " + data + " --skip-bad-lines", 1));  // skipped and counted
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 bad lines skipped"), std::string::npos) << r.output;

  r = run(sft_train(model, "--data " + data + " --max-seq-len 129"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--max-seq-len: 129 exceeds the model's 128 positions"), std::string::npos) << r.output;

  const std::string gpt2 = write_model(dir, {{"model_type", "gpt2"}, {"vocab_size", 272}, {"n_positions", 64},
                                             {"n_embd", 32}, {"n_layer", 1}, {"n_head", 2}});
  write_text(data, "{\"text\": \"fine\"}\n");
  r = run(sft_train(gpt2, "--data " + data + " --pack"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("cannot take packed rows"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--pad"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ds::faults
