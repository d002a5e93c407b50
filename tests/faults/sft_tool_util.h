// Shared by the ds-train --model-dir tests (sft_train_test, sft_export_test, sft_mpi_test): a tiny
// Hugging Face folder written here, ds-train's command line for it, and its "loss A -> B" line.
#pragma once

#include <nlohmann/json.hpp>

#include <regex>
#include <string>
#include <utility>

#include "../data/sft_test_util.h"
#include "faults_test_util.h"
#include "models/pretrained.h"

namespace ds::faults {

// A tiny Hugging Face folder <dir>/<name>: config.json + model.safetensors of `config` (seed 0),
// and the toy byte-level tokenizer (ids < 259).
inline std::string write_model(const TempDir& dir, nlohmann::json config, std::string name = "") {
  const std::string m = dir.file(name.empty() ? config["model_type"].get<std::string>() : name);
  torch::manual_seed(0);
  models::save_pretrained(*models::from_config(config), m);
  data::test::write_toy_tokenizer(m);
  return m;
}

inline nlohmann::json tiny_llama() {
  return {{"model_type", "llama"},     {"vocab_size", 272},        {"hidden_size", 32},
          {"intermediate_size", 64},   {"num_hidden_layers", 2},   {"num_attention_heads", 2},
          {"num_key_value_heads", 1},  {"max_position_embeddings", 128}};
}

inline std::string sft_train(const std::string& model, const std::string& args, int steps = 8) {
  return tool("ds-train") + " --model-dir " + model + " --progress off --steps " + std::to_string(steps) + " " + args;
}

// "loss A -> B" from ds-train's last line ({0, 0} when absent).
inline std::pair<double, double> losses(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("loss ([0-9.]+) -> ([0-9.]+)"))) return {0, 0};
  return {std::stod(m[1]), std::stod(m[2])};
}

// Small micro-batches and a brisk lr (a quick test); `zero`, when given, is the zero_optimization object.
inline std::string small_config(const TempDir& dir, const std::string& zero = "",
                                const std::string& name = "ds_config.json") {
  const std::string config = dir.file(name);
  write_text(config, R"({"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "betas": [0.9, 0.95], "weight_decay": 0.0}})" +
                         (zero.empty() ? std::string() : ", \"zero_optimization\": " + zero) + "}");
  return config;
}

}  // namespace ds::faults
