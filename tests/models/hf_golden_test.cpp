// Golden test of the Hugging Face families: for a llama (GQA, rope_scaling llama3, pad row),
// a mistral (sliding window shorter than the sequence, dynamic rope past max_position_embeddings,
// sharded files), a qwen2 (q/k/v bias, tied head, window from layer 1, linear rope, bf16 file),
// an opt-125m-shaped and an opt-350m-shaped model (post-LN, project_in/out): the test builds each
// from an HF config, moves its weights off init, writes it with save_pretrained, loads it back with
// from_pretrained, and compares logits, HF's causal-LM loss and every parameter gradient against
// tests/models/hf_reference.py (independent explicit-ops code run by Debian's python3-torch, which
// reads the same files the way transformers does).
// Tolerance, per tensor: max|ours − ref| ≤ 1e-5 · max(max|ref|, 1e-6) (float32, one thread).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "format/safetensors.h"
#include "models/hf_weights.h"
#include "models/pretrained.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPython = "/usr/bin/python3";
constexpr int kExitNoTorch = 77;
constexpr double kRelTol = 1e-5;
constexpr int64_t kBatch = 2, kSeq = 24;

struct Case {
  std::string name;
  json config;
  ds::models::SaveOptions save;
};

json llama_config() {
  return {{"model_type", "llama"}, {"vocab_size", 101}, {"hidden_size", 32}, {"intermediate_size", 48},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
          // original 64: wavelengths 6.3 (< 16, kept), 63 (smoothed), 628 and 6283 (> 64, divided by 8)
          {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}}},
          {"tie_word_embeddings", false}, {"pad_token_id", 0}, {"hidden_act", "silu"}};
}

json mistral_config() {
  return {{"model_type", "mistral"}, {"vocab_size", 97}, {"hidden_size", 32}, {"intermediate_size", 40},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 1},
          {"max_position_embeddings", 16},  // < kSeq: the dynamic NTK base grows
          {"rms_norm_eps", 1e-6}, {"rope_theta", 1000.0}, {"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}},
          {"sliding_window", 6}, {"tie_word_embeddings", false}};
}

json qwen2_config() {
  return {{"model_type", "qwen2"}, {"vocab_size", 89}, {"hidden_size", 24}, {"intermediate_size", 56},
          {"num_hidden_layers", 2}, {"num_attention_heads", 3}, {"num_key_value_heads", 1},
          {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
          {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}, {"tie_word_embeddings", true},
          {"use_sliding_window", true}, {"sliding_window", 8}, {"max_window_layers", 1}};
}

json opt125m_config() {  // facebook/opt-125m's architecture at tiny widths
  return {{"model_type", "opt"}, {"vocab_size", 101}, {"hidden_size", 32}, {"ffn_dim", 64},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"max_position_embeddings", 32},
          {"do_layer_norm_before", true}, {"word_embed_proj_dim", 32}, {"activation_function", "relu"},
          {"pad_token_id", 1}};
}

json opt350m_config() {  // facebook/opt-350m's: post-LN, no final layer norm, 512 → 1024 projections
  return {{"model_type", "opt"}, {"vocab_size", 101}, {"hidden_size", 32}, {"ffn_dim", 64},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"max_position_embeddings", 32},
          {"do_layer_norm_before", false}, {"word_embed_proj_dim", 16}, {"activation_function", "relu"},
          {"pad_token_id", 1}};
}

std::vector<Case> all_cases() {
  ds::models::SaveOptions sharded;
  sharded.max_shard_bytes = 20000;  // several shards + model.safetensors.index.json
  ds::models::SaveOptions bf16;
  bf16.dtype = torch::kBFloat16;  // the file is bf16; both sides compute in fp32 from its values
  return {{"llama", llama_config(), {}},
          {"mistral", mistral_config(), sharded},
          {"qwen2", qwen2_config(), bf16},
          {"opt125m", opt125m_config(), {}},
          {"opt350m", opt350m_config(), {}}};
}

void write_inputs(const fs::path& dir, const torch::Tensor& ids, const torch::Tensor& labels) {
  ds::format::SafetensorsWriter w((dir / "inputs.safetensors").string());
  w.add("input_ids", ds::format::StDtype::I64, ids.sizes().vec(), ids.data_ptr());
  w.add("labels", ds::format::StDtype::I64, labels.sizes().vec(), labels.data_ptr());
  w.commit();
}

class ThreadsGuard {
 public:
  explicit ThreadsGuard(int n) : saved_(torch::get_num_threads()) { torch::set_num_threads(n); }
  ~ThreadsGuard() { torch::set_num_threads(saved_); }

 private:
  int saved_;
};

// All cases are written first and the reference runs once for all of them (one interpreter start).
class HfGolden : public ::testing::TestWithParam<std::string> {
 public:
  static void SetUpTestSuite() {
    if (!fs::exists(kPython)) {
      skip_ = std::string(kPython) + " not found (install python3-torch)";
      return;
    }
    root_ = fs::temp_directory_path() / ("ds_hf_golden_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    std::string dirs;
    uint64_t seed = 100;
    for (const auto& c : all_cases()) {
      const fs::path dir = root_ / c.name;
      torch::manual_seed(++seed);
      auto model = ds::models::from_config(c.config);
      {
        // Off HF init (unit norms, zero biases, zero pad row) so every parameter's role is tested.
        torch::NoGradGuard ng;
        for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.2);
      }
      ds::models::save_pretrained(*model, dir.string(), c.save);
      const int64_t vocab = c.config["vocab_size"];
      auto ids = torch::randint(vocab, {kBatch, kSeq}, torch::kLong);
      ids.index_put_({0, 3}, 0);  // pad token ids (llama 0, opt 1) appear in the input
      ids.index_put_({1, 7}, 1);
      auto labels = ids.clone();
      labels.index_put_({0, torch::indexing::Slice(0, 5)}, -100);  // a prompt the loss ignores
      labels.index_put_({1, 12}, -100);
      write_inputs(dir, ids, labels);
      dirs += " '" + dir.string() + "'";
    }
    const std::string script = std::string(DS_SOURCE_DIR) + "/tests/models/hf_reference.py";
    const std::string cmd = std::string(kPython) + " '" + script + "'" + dirs + " > '" +
                            (root_ / "python.log").string() + "' 2>&1";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    python_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rc_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream log_file(root_ / "python.log");
    log_.assign(std::istreambuf_iterator<char>(log_file), std::istreambuf_iterator<char>());
    if (rc_ == kExitNoTorch) skip_ = std::string(kPython) + " cannot import torch (install python3-torch): " + log_;
    std::printf("[hf golden] python reference for %zu models: %.2f s\n", all_cases().size(), python_s_);
  }

  static void TearDownTestSuite() {
    if (!failed_ && !root_.empty()) fs::remove_all(root_);
    else if (failed_) std::printf("[hf golden] inputs and reference outputs kept in %s\n", root_.c_str());
  }

 protected:
  static inline fs::path root_;
  static inline std::string skip_, log_;
  static inline int rc_ = 0;
  static inline double python_s_ = 0;
  static inline bool failed_ = false;
};

// Returns err / tolerance (≤ 1 passes). `floor`: the smallest scale the tolerance is relative to.
double expect_close(const std::string& what, const torch::Tensor& ours, const torch::Tensor& ref, double floor = 1e-6) {
  EXPECT_EQ(ours.sizes(), ref.sizes()) << what;
  if (ours.sizes() != ref.sizes()) return INFINITY;
  const double scale = std::max(ref.abs().max().item<double>(), floor);
  const double err = (ours.to(torch::kFloat) - ref).abs().max().item<double>();
  EXPECT_LE(err, kRelTol * scale) << what << ": max abs diff " << err << ", max |ref| " << scale;
  return err / (kRelTol * scale);
}

TEST_P(HfGolden, LogitsLossAndEveryGradientMatchTheReference) {
  if (!skip_.empty()) GTEST_SKIP() << "golden test skipped: " << skip_;
  ASSERT_EQ(rc_, 0) << "reference script failed:\n" << log_;
  ThreadsGuard threads(1);
  const fs::path dir = root_ / GetParam();

  auto model = ds::models::from_pretrained(dir.string());
  const ds::models::HfWeights inputs((dir / "inputs.safetensors").string());
  auto ids = inputs.read("input_ids", torch::kLong);
  auto labels = inputs.read("labels", torch::kLong);
  const ds::models::HfWeights ref((dir / "ref.safetensors").string());

  auto logits = model->forward(ids);
  auto loss = ds::models::causal_lm_loss(logits, labels);
  model->zero_grad();
  loss.backward();

  double worst = expect_close("logits", logits.detach(), ref.read("logits", torch::kFloat));
  worst = std::max(worst, expect_close("loss", loss.detach().reshape({1}), ref.read("loss", torch::kFloat)));
  int compared = 0;
  for (const auto& item : model->named_parameters()) {
    const auto& g = item.value().grad();
    ASSERT_TRUE(g.defined()) << item.key() << " has no gradient";
    ASSERT_TRUE(ref.contains("grad/" + item.key())) << item.key() << " is not in the saved files";
    // OPT's key bias shifts every score of a query by the same amount, which softmax cancels: its
    // true gradient is 0 and both sides hold rounding noise (~1e-8). Those are held to the scale
    // of the same projection's weight gradient instead (Llama's key bias is rotated, so it is not).
    double floor = 1e-6;
    if (model->model_type() == "opt" && item.key().ends_with("k_proj.bias")) {
      const std::string w = item.key().substr(0, item.key().size() - 4) + "weight";
      floor = ref.read("grad/" + w, torch::kFloat).abs().max().item<double>();
      EXPECT_LT(ref.read("grad/" + item.key(), torch::kFloat).abs().max().item<double>(), 1e-5 * floor) << item.key();
    }
    worst = std::max(worst, expect_close("grad " + item.key(), g, ref.read("grad/" + item.key(), torch::kFloat), floor));
    ++compared;
  }
  // Every tensor the files hold is a parameter we compared (nothing saved twice or left out).
  int in_files = 0;
  for (const auto& n : ref.names()) in_files += n.starts_with("grad/") ? 1 : 0;
  EXPECT_EQ(compared, in_files);
  std::printf("[hf golden] %s: %d gradients compared, worst error %.3f of tolerance\n", GetParam().c_str(), compared,
              worst);
  RecordProperty("worst_error_of_tolerance", std::to_string(worst));
  if (HasFailure()) failed_ = true;
}

INSTANTIATE_TEST_SUITE_P(Families, HfGolden, ::testing::Values("llama", "mistral", "qwen2", "opt125m", "opt350m"),
                         [](const auto& info) { return info.param; });

}  // namespace
