// from_pretrained / save_pretrained: bit-identical round trips for every family (fp32, bf16 and
// sharded files), what the files look like to Hugging Face (names, tied weights once, metadata,
// index), base-model prefixes, and the errors: missing tensor, wrong shape, missing config,
// unknown model_type, broken index.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "format/safetensors.h"
#include "models/gpt2.h"
#include "models/hf_weights.h"
#include "models/llama_config.h"
#include "models/opt_config.h"
#include "models/pretrained.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ds::models::CausalLM;

class TempDir {
 public:
  TempDir() {
    static int n = 0;
    path_ = fs::temp_directory_path() / ("ds_pretrained_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& s) const { return path_ / s; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

json config_of(const std::string& type) {
  if (type == "gpt2") return {{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_positions", 16}, {"n_embd", 16},
                              {"n_layer", 2}, {"n_head", 2}};
  if (type == "opt") return {{"model_type", "opt"}, {"vocab_size", 50}, {"hidden_size", 16}, {"ffn_dim", 24},
                             {"num_hidden_layers", 2}, {"num_attention_heads", 2}, {"max_position_embeddings", 16},
                             {"word_embed_proj_dim", 8}, {"do_layer_norm_before", false}};
  json j = {{"model_type", type}, {"vocab_size", 50}, {"hidden_size", 16}, {"intermediate_size", 24},
            {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}};
  if (type == "qwen2") j["tie_word_embeddings"] = true;
  return j;
}

std::shared_ptr<CausalLM> random_model(const std::string& type, uint64_t seed = 1) {
  torch::manual_seed(seed);
  auto m = ds::models::from_config(config_of(type));
  torch::NoGradGuard ng;
  for (auto& p : m->parameters()) p.add_(torch::randn_like(p) * 0.1);
  return m;
}

void expect_identical(CausalLM& a, CausalLM& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    ASSERT_TRUE(pb.contains(item.key())) << item.key();
    EXPECT_EQ(item.value().scalar_type(), pb[item.key()].scalar_type()) << item.key();
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  }
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "<no error>";
}

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, SaveLoadSaveLoadIsBitIdentical) {
  TempDir dir;
  auto a = random_model(GetParam());
  ds::models::save_pretrained(*a, (dir / "a").string());
  auto b = ds::models::from_pretrained((dir / "a").string());
  EXPECT_EQ(b->model_type(), GetParam());
  expect_identical(*a, *b);
  ds::models::save_pretrained(*b, (dir / "b").string());
  auto c = ds::models::from_pretrained((dir / "b").string());
  expect_identical(*b, *c);
  // Same config, same bytes on disk.
  auto read = [](const fs::path& p) { return std::string(std::istreambuf_iterator<char>(std::ifstream(p, std::ios::binary).rdbuf()), {}); };
  EXPECT_EQ(read(dir / "a/config.json"), read(dir / "b/config.json"));
  EXPECT_EQ(read(dir / "a/model.safetensors"), read(dir / "b/model.safetensors"));
  auto ids = torch::randint(50, {2, 8}, torch::kLong);
  EXPECT_TRUE(torch::equal(a->forward(ids), c->forward(ids)));
}

INSTANTIATE_TEST_SUITE_P(Families, RoundTrip, ::testing::Values("gpt2", "llama", "mistral", "qwen2", "opt"),
                         [](const auto& info) { return info.param; });

TEST(Pretrained, FilesLookLikeHuggingFaces) {
  TempDir dir;
  auto m = random_model("qwen2");  // tied
  ds::models::save_pretrained(*m, dir.str());
  ds::format::SafetensorsFile f((dir / "model.safetensors").string());
  EXPECT_EQ(f.metadata().at("format"), "pt");  // transformers refuses files without it
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);  // tied: saved once, as transformers does
  ASSERT_NE(f.find("model.embed_tokens.weight"), nullptr);
  EXPECT_EQ(f.at("model.layers.1.self_attn.q_proj.bias").shape, std::vector<int64_t>({16}));
  auto cfg = ds::models::read_hf_config(dir.str());
  EXPECT_EQ(cfg["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(cfg["torch_dtype"], "float32");
  EXPECT_EQ(cfg["tie_word_embeddings"], true);

  // GPT-2's Conv1D weights are stored [in, out].
  auto g = random_model("gpt2");
  ds::models::save_pretrained(*g, (dir / "g").string());
  ds::format::SafetensorsFile gf((dir / "g/model.safetensors").string());
  EXPECT_EQ(gf.at("transformer.h.0.attn.c_attn.weight").shape, std::vector<int64_t>({16, 48}));
}

TEST(Pretrained, ShardedFilesWithIndexLoadTheSame) {
  TempDir dir;
  auto m = random_model("llama");
  ds::models::SaveOptions opts;
  opts.max_shard_bytes = 4096;
  ds::models::save_pretrained(*m, dir.str(), opts);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  ASSERT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
  auto index = json::parse(std::ifstream(dir / "model.safetensors.index.json"));
  std::set<std::string> shards;
  for (const auto& [name, file] : index["weight_map"].items()) shards.insert(file.get<std::string>());
  EXPECT_GT(shards.size(), 2u);
  EXPECT_TRUE(shards.count("model-00001-of-0000" + std::to_string(shards.size()) + ".safetensors"));
  int64_t bytes = 0;
  for (const auto& p : m->parameters()) bytes += p.numel() * 4;
  EXPECT_EQ(index["metadata"]["total_size"], bytes);
  auto back = ds::models::from_pretrained(dir.str());
  expect_identical(*m, *back);
  // Saving again unsharded replaces the shards (no stale index that would win).
  ds::models::save_pretrained(*back, dir.str());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir / *shards.begin()));
  expect_identical(*m, *ds::models::from_pretrained(dir.str()));
}

TEST(Pretrained, Bf16AndFp16FilesConvert) {
  TempDir dir;
  auto m = random_model("opt");
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    ds::models::SaveOptions opts;
    opts.dtype = dtype;
    ds::models::save_pretrained(*m, dir.str(), opts);
    EXPECT_EQ(ds::models::read_hf_config(dir.str())["torch_dtype"], dtype == torch::kBFloat16 ? "bfloat16" : "float16");
    auto back = ds::models::from_pretrained(dir.str());  // fp32 parameters holding the 16-bit values
    for (const auto& item : m->named_parameters()) {
      auto p = back->named_parameters()[item.key()];
      EXPECT_EQ(p.scalar_type(), torch::kFloat);
      EXPECT_TRUE(torch::equal(p, item.value().to(dtype).to(torch::kFloat))) << item.key();
    }
    ds::models::PretrainedOptions as16;
    as16.dtype = torch::kBFloat16;
    auto low = ds::models::from_pretrained(dir.str(), as16);
    for (const auto& p : low->parameters()) EXPECT_EQ(p.scalar_type(), torch::kBFloat16);
  }
}

TEST(Pretrained, BaseModelCheckpointsWithoutThePrefixLoad) {
  // LlamaModel / OPTModel save "layers.0...." / "decoder.layers.0...." (no "model.").
  TempDir dir;
  auto m = random_model("mistral");
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : m->named_parameters()) {
    std::string name = item.key();
    if (name.starts_with("model.")) name = name.substr(6);
    tensors.emplace_back(name, item.value());
  }
  ds::models::write_hf_weights(dir.str(), tensors);
  std::ofstream(dir / "config.json") << m->hf_config().dump();
  expect_identical(*m, *ds::models::from_pretrained(dir.str()));
}

TEST(Pretrained, MissingTensorNamesTheTensorAndTheFile) {
  TempDir dir;
  auto m = random_model("llama");
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : m->named_parameters())
    if (item.key() != "model.layers.1.mlp.up_proj.weight") tensors.emplace_back(item.key(), item.value());
  ds::models::write_hf_weights(dir.str(), tensors);
  std::ofstream(dir / "config.json") << m->hf_config().dump();
  const auto msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir / "model.safetensors").string()), std::string::npos) << msg;
}

TEST(Pretrained, WrongShapeNamesTheTensorAndBothShapes) {
  TempDir dir;
  auto m = random_model("opt");
  ds::models::save_pretrained(*m, dir.str());
  auto cfg = ds::models::read_hf_config(dir.str());
  cfg["ffn_dim"] = 20;  // the files hold fc1 [24, 16]
  std::ofstream(dir / "config.json") << cfg.dump();
  const auto msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("model.decoder.layers.0.fc1.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[24,16]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[20,16]"), std::string::npos) << msg;
}

TEST(Pretrained, ConfigErrors) {
  TempDir dir;
  auto msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  std::ofstream(dir / "config.json") << "{\"model_type\": \"falcon\", \"hidden_size\": 8}";
  msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("\"falcon\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("opt"), std::string::npos) << msg;
  std::ofstream(dir / "config.json") << "{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 8}";
  try {
    ds::models::from_pretrained(dir.str());
    ADD_FAILURE();
  } catch (const ds::ConfigError& e) {
    EXPECT_EQ(e.path(), "intermediate_size");
    EXPECT_NE(std::string(e.what()).find((dir / "config.json").string()), std::string::npos) << e.what();
  }
  std::ofstream(dir / "config.json") << "{not json";
  msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  // Config fine, no weights.
  std::ofstream(dir / "config.json") << config_of("llama").dump();
  msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
}

TEST(Pretrained, BrokenIndexesAreClearErrors) {
  TempDir dir;
  auto m = random_model("llama");
  ds::models::SaveOptions opts;
  opts.max_shard_bytes = 4096;
  ds::models::save_pretrained(*m, dir.str(), opts);
  auto index = json::parse(std::ifstream(dir / "model.safetensors.index.json"));
  auto moved = index;
  moved["weight_map"]["model.norm.weight"] = "model-00001-of-00009.safetensors";  // not there
  std::ofstream(dir / "model.safetensors.index.json") << moved.dump();
  auto msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("model-00001-of-00009.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  auto wrong = index;
  const std::string first = index["weight_map"]["model.embed_tokens.weight"];
  wrong["weight_map"]["model.norm.weight"] = first;  // a shard without it
  std::ofstream(dir / "model.safetensors.index.json") << wrong.dump();
  msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("model.norm.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find(first), std::string::npos) << msg;
  std::ofstream(dir / "model.safetensors.index.json") << "{\"weight_map\": 3}";
  msg = message_of([&] { ds::models::from_pretrained(dir.str()); });
  EXPECT_NE(msg.find("not a safetensors index"), std::string::npos) << msg;
}

// The config.json files of real checkpoints (as published, extra keys and all) parse, and give
// the parameter counts transformers reports for them.
TEST(Pretrained, RealConfigsParseToTheirKnownSizes) {
  const json llama32_1b = json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072,
    "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
    "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");
  const json mistral_7b = json::parse(R"({
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})");
  const json qwen25_05b = json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
  const json opt_125m = json::parse(R"({
    "_name_or_path": "facebook/opt-125m", "_remove_final_layer_norm": false, "activation_dropout": 0.0,
    "activation_function": "relu", "architectures": ["OPTForCausalLM"], "attention_dropout": 0.0,
    "bos_token_id": 2, "do_layer_norm_before": true, "dropout": 0.1, "eos_token_id": 2, "ffn_dim": 3072,
    "hidden_size": 768, "init_std": 0.02, "layerdrop": 0.0, "max_position_embeddings": 2048, "model_type": "opt",
    "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 1, "prefix": "</s>",
    "torch_dtype": "float16", "transformers_version": "4.21.0.dev0", "use_cache": true, "vocab_size": 50272,
    "word_embed_proj_dim": 768})");
  json opt_350m = opt_125m;
  opt_350m.update(json::parse(R"({"do_layer_norm_before": false, "ffn_dim": 4096, "hidden_size": 1024,
    "num_attention_heads": 16, "num_hidden_layers": 24, "word_embed_proj_dim": 512})"));
  const auto llama = ds::models::LlamaConfig::from_hf_json(llama32_1b);
  EXPECT_EQ(llama.num_parameters(), 1'235'814'400);
  EXPECT_EQ(llama.eos_token_id, json({128001, 128008, 128009}));
  EXPECT_EQ(llama.rope_scaling.type, "llama3");
  EXPECT_EQ(ds::models::LlamaConfig::from_hf_json(mistral_7b).num_parameters(), 7'241'732'096);
  const auto qwen = ds::models::LlamaConfig::from_hf_json(qwen25_05b);
  EXPECT_EQ(qwen.num_parameters(), 494'032'768);
  EXPECT_FALSE(qwen.sliding_window.has_value());
  EXPECT_EQ(ds::models::OPTConfig::from_hf_json(opt_125m).num_parameters(), 125'239'296);
  EXPECT_EQ(ds::models::OPTConfig::from_hf_json(opt_350m).num_parameters(), 331'196'416);
  json bad = llama32_1b;
  bad["eos_token_id"] = "</s>";
  EXPECT_THROW(ds::models::LlamaConfig::from_hf_json(bad), ds::ConfigError);
}

}  // namespace
