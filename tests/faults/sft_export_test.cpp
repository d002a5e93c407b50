// ds-zero-to-fp32 on checkpoints of ds-train --model-dir (issue 19): each family is exported in its
// Hugging Face layout — the weights under HF's names (no lm_head.weight when the head is tied, as HF
// saves it) and the folder's config.json — so from_pretrained(export) equals, tensor for tensor and
// bit for bit, the checkpoint loaded back into an engine. A checkpoint that does not record its
// model still exports its tensors and says why there is no config.json.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include "format/safetensors.h"
#include "sft_tool_util.h"
#include "zero/gathered_parameters.h"

namespace ds::faults::sft_export {  // its own: the unity build shares file-local names
namespace {

std::string export_cmd(const std::string& ckpt, const std::string& out) {
  return tool("ds-zero-to-fp32") + " " + ckpt + " " + out;
}

// The checkpoint's parameters: the folder's model in an engine of the training config, loaded.
std::map<std::string, torch::Tensor> checkpoint_params(const std::string& model_dir, const std::string& config,
                                                       const std::string& ckpt) {
  auto engine = initialize(models::from_pretrained(model_dir), nlohmann::json::parse(read_text(config)));
  EXPECT_TRUE(engine.load_checkpoint(ckpt).has_value()) << ckpt;
  zero::GatheredParameters full(engine);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : engine.model().named_parameters()) out[p.key()] = p.value().detach().clone();
  return out;
}

struct Case {
  const char* name;
  nlohmann::json config;
  int stage;
  int ranks;
};

// Trains `c` for 2 steps through ds-train, saves, exports, and compares the export with the checkpoint.
void export_and_compare(const Case& c) {
  TempDir dir(std::string("sft_export_") + c.name);
  const std::string model = write_model(dir, c.config);
  const std::string config = small_config(dir, "{\"stage\": " + std::to_string(c.stage) + "}");
  const std::string ckpt = dir.file("ckpt"), out = dir.file("hf");
  const std::string train = sft_train(model, "--data " + source_path("examples/fine_tuning/train.jsonl") +
                                                 " --max-seq-len 64 --config " + config + " --save " + ckpt, 2);
  auto r = run(c.ranks > 1 ? mpirun(c.ranks) + " " + train : train);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(export_cmd(ckpt, out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string type = c.config["model_type"];
  EXPECT_NE(r.output.find("(Hugging Face " + type + " layout + config.json)"), std::string::npos) << r.output;

  // The config.json is the folder's, with the export's dtype.
  auto written = nlohmann::json::parse(read_text(out + "/config.json"));
  EXPECT_EQ(written["torch_dtype"], "float32");
  written.erase("torch_dtype");
  auto original = models::read_hf_config(model);
  original.erase("torch_dtype");
  EXPECT_EQ(written, original);

  // HF's names: the tied head is not written; an untied one is.
  format::SafetensorsFile file(out + "/model.safetensors");
  const bool tied = c.config.value("tie_word_embeddings", type == "opt");
  EXPECT_EQ(file.find("lm_head.weight") != nullptr, !tied) << c.name;

  const auto want = checkpoint_params(model, config, ckpt);
  const auto loaded = models::from_pretrained(out);  // fp32, every tensor from the export
  size_t compared = 0;
  for (const auto& p : loaded->named_parameters()) {
    auto it = want.find(p.key());
    ASSERT_NE(it, want.end()) << c.name << ": the export has " << p.key() << ", the checkpoint does not";
    EXPECT_TRUE(torch::equal(p.value(), it->second)) << c.name << " " << p.key();
    ++compared;
  }
  EXPECT_EQ(compared, want.size()) << c.name;
  EXPECT_EQ(file.tensors().size(), want.size()) << c.name;
  // Trained: the checkpoint is not the folder's starting weights.
  auto start = models::from_pretrained(model)->named_parameters();
  size_t changed = 0;
  for (const auto& [name, t] : want) changed += start.contains(name) && !torch::equal(start[name], t);
  EXPECT_GT(changed, 0u) << c.name << ": the checkpoint holds the untrained weights";
}

nlohmann::json with(nlohmann::json j, const nlohmann::json& more) {
  j.update(more);
  return j;
}

TEST(SftExport, LlamaUntiedAtZero2) {
  export_and_compare({"llama", with(tiny_llama(), {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}}), 2, 1});
}

TEST(SftExport, Qwen2TiedWithBiasAtZero3) {
  export_and_compare({"qwen2", with(tiny_llama(), {{"model_type", "qwen2"}, {"tie_word_embeddings", true}}), 3, 1});
}

TEST(SftExport, MistralAtZero3) {
  export_and_compare({"mistral", with(tiny_llama(), {{"model_type", "mistral"}, {"sliding_window", 16}}), 3, 1});
}

// opt-350m's shape: project_in / project_out, post-LN, tied head.
TEST(SftExport, OptWithProjectionsAtZero3) {
  export_and_compare({"opt",
                      {{"model_type", "opt"}, {"vocab_size", 272}, {"hidden_size", 32}, {"ffn_dim", 64},
                       {"num_hidden_layers", 2}, {"num_attention_heads", 2}, {"max_position_embeddings", 128},
                       {"word_embed_proj_dim", 16}, {"do_layer_norm_before", false}},
                      3, 1});
}

// Two ranks write two partitions; the export joins them.
TEST(SftExport, Qwen2TiedAtZero3OnTwoRanks) {
  export_and_compare({"qwen2_np2", with(tiny_llama(), {{"model_type", "qwen2"}, {"tie_word_embeddings", true}}), 3, 2});
}

// A checkpoint saved through the API without client_state: its tensors, and a note on config.json.
TEST(SftExport, WithoutModelInfoExportsTensorsAndSaysWhy) {
  TempDir dir("sft_export_bare");
  torch::manual_seed(0);
  auto engine = initialize(models::from_config(tiny_llama()), nlohmann::json::parse(R"({
      "train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
      "zero_optimization": {"stage": 2}})"));
  engine.save_checkpoint(dir.file("bare"));
  engine.save_checkpoint(dir.file("old"), "", {{"model", {{"type", "llama"}, {"dir", "/models/tiny-llama"}}}});

  auto r = run(export_cmd(dir.file("bare"), dir.file("hf_bare")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir.file("hf_bare/model.safetensors")));
  EXPECT_FALSE(fs::exists(dir.file("hf_bare/config.json")));
  EXPECT_NE(r.output.find("no config.json written: the checkpoint does not record its model"), std::string::npos)
      << r.output;
  format::SafetensorsFile file(dir.file("hf_bare/model.safetensors"));
  size_t n = 0;
  for (const auto& p : engine.model().named_parameters()) {
    ASSERT_NE(file.find(p.key()), nullptr) << p.key();
    ++n;
  }
  EXPECT_EQ(file.tensors().size(), n);

  // Recorded by an older ds-train (type and folder, no config): the note names the folder's file.
  r = run(export_cmd(dir.file("old"), dir.file("hf_old")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dir.file("hf_old/config.json")));
  EXPECT_NE(r.output.find("records model_type \"llama\" but not its config.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("copy /models/tiny-llama/config.json into the output folder"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ds::faults::sft_export
