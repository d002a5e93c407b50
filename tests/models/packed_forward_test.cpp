// Packed rows (models/sequence_layout.h): a row holding several documents, given their segment and
// position ids, has exactly the loss and gradients of each document run alone — for the Llama
// family (GQA, mistral's sliding window, qwen2's bias), OPT (learned positions, opt-350m's
// post-norm) and GPT-2 (learned positions). Without the layout the documents see each other and the
// loss differs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/pretrained.h"
#include "util/error.h"

namespace {

using nlohmann::json;
using ds::models::CausalLM;

json family(const std::string& type) {
  if (type == "gpt2")
    return {{"model_type", "gpt2"}, {"vocab_size", 64}, {"n_positions", 32}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4}};
  json j = {{"model_type", type},        {"vocab_size", 64},         {"hidden_size", 32},
            {"num_hidden_layers", 2},    {"num_attention_heads", 4}, {"max_position_embeddings", 32}};
  if (type == "opt" || type == "opt350") {
    j["model_type"] = "opt";
    j["ffn_dim"] = 48;
    if (type == "opt350") j["do_layer_norm_before"] = false, j["word_embed_proj_dim"] = 16;
  } else {
    j["intermediate_size"] = 40;
    j["num_key_value_heads"] = 2;
    if (type == "mistral") j["sliding_window"] = 3;
  }
  return j;
}

// Document lengths in one packed row of 16 (3 pad tokens at the end).
const std::vector<int64_t> kDocs = {5, 3, 5};
constexpr int64_t kRow = 16;

// Sum of per-token cross-entropies (mean * count), the quantity packing must preserve.
torch::Tensor loss_sum(CausalLM& m, const torch::Tensor& idx, const torch::Tensor& targets) {
  return m.forward(idx, targets) * (targets != -100).sum();
}

struct Packed {
  torch::Tensor ids, targets, segments, positions;
  std::vector<torch::Tensor> doc_ids, doc_targets;
};

Packed make_packed() {
  torch::manual_seed(5);
  Packed p;
  p.ids = torch::zeros({1, kRow}, torch::kLong);
  p.targets = torch::full({1, kRow}, -100, torch::kLong);
  p.segments = torch::full({1, kRow}, -1, torch::kLong);
  p.positions = torch::zeros({1, kRow}, torch::kLong);
  int64_t t = 0;
  for (size_t d = 0; d < kDocs.size(); ++d) {
    const int64_t n = kDocs[d];
    auto ids = torch::randint(1, 64, {1, n}, torch::kLong);
    auto tg = torch::full({1, n}, -100, torch::kLong);
    tg.narrow(1, 0, n - 1).copy_(ids.narrow(1, 1, n - 1));  // predict the next token of the same document
    p.ids.narrow(1, t, n).copy_(ids);
    p.targets.narrow(1, t, n).copy_(tg);
    p.segments.narrow(1, t, n).fill_(static_cast<int64_t>(d));
    p.positions.narrow(1, t, n).copy_(torch::arange(n).unsqueeze(0));
    p.doc_ids.push_back(ids);
    p.doc_targets.push_back(tg);
    t += n;
  }
  return p;
}

class PackedForward : public ::testing::TestWithParam<std::string> {};

TEST_P(PackedForward, EqualsEachDocumentAlone) {
  torch::manual_seed(0);
  auto model = ds::models::from_config(family(GetParam()));
  const Packed p = make_packed();

  model->zero_grad();
  torch::Tensor separate = torch::zeros({});
  for (size_t d = 0; d < kDocs.size(); ++d) separate = separate + loss_sum(*model, p.doc_ids[d], p.doc_targets[d]);
  separate.backward();
  std::vector<torch::Tensor> grads_separate;
  for (auto& q : model->parameters()) grads_separate.push_back(q.grad().clone());

  model->zero_grad();
  model->set_sequence_layout(ds::models::SequenceLayout::from_segments(p.segments, p.positions));
  auto packed = loss_sum(*model, p.ids, p.targets);
  packed.backward();
  EXPECT_NEAR(packed.item<double>(), separate.item<double>(), 1e-5 * std::abs(separate.item<double>()));
  size_t i = 0;
  for (auto& q : model->parameters()) {
    EXPECT_TRUE(torch::allclose(q.grad(), grads_separate[i], 1e-5, 1e-6)) << GetParam() << " parameter " << i;
    ++i;
  }

  model->set_sequence_layout(std::nullopt);  // plain causal rows: later documents see earlier ones
  auto unpacked = loss_sum(*model, p.ids, p.targets);
  EXPECT_GT(std::abs(unpacked.item<double>() - separate.item<double>()), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Families, PackedForward, ::testing::Values("llama", "mistral", "qwen2", "opt", "opt350", "gpt2"));

TEST(PackedForwardErrors, ShapesMustMatch) {
  const Packed p = make_packed();
  auto llama = ds::models::from_config(family("llama"));
  llama->set_sequence_layout(ds::models::SequenceLayout::from_segments(p.segments, p.positions));
  EXPECT_THROW(llama->forward(p.ids.narrow(1, 0, 8)), ds::Error);  // a layout of [1,16] for a [1,8] batch
}

}  // namespace
