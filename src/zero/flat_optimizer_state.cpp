// The optimizer's step counters in the checkpoint manifest's "engine" JSON (the tensors themselves
// are in the rank files).
#include <nlohmann/json.hpp>

#include "zero/flat_optimizer.h"
#include "util/error.h"

namespace ds::zero {

nlohmann::json FlatOptimizer::state_json() const {
  const auto a = adam_state();
  nlohmann::json j = {
      {"type", to_string(type())},
      {"step", step_count()},
      {"adam", {{"step", a.step}, {"beta1", a.beta1}, {"beta2", a.beta2}, {"beta1_t", a.beta1_t}, {"beta2_t", a.beta2_t}}}};
  if (compressed_) j["onebit"] = compressed_->state_json();
  return j;
}

void FlatOptimizer::load_state_json(const nlohmann::json& j) {
  const nlohmann::json& a = j.at("adam");
  restore_counters(j.at("step"), {a.at("step"), a.at("beta1"), a.at("beta2"), a.at("beta1_t"), a.at("beta2_t")});
  if (compressed_) {
    DS_CHECK(j.contains("onebit"), Error,
             "checkpoint: the optimizer is " + to_string(type()) + " but the checkpoint's optimizer state (" +
                 j.value("type", std::string("?")) + ") has no 1-bit state; load it with load_optimizer_states=false");
    compressed_->load_state_json(j.at("onebit"));
  }
}

torch::Tensor FlatOptimizer::rank_state() const {
  if (!compressed_) return {};
  std::vector<float> e = compressed_->errors();
  return torch::from_blob(e.data(), {int64_t(e.size())}, torch::kFloat32).clone();
}

bool FlatOptimizer::load_rank_state(const torch::Tensor& saved) {
  if (!compressed_) return false;
  if (!saved.defined()) return compressed_->load_errors({});
  const torch::Tensor t = saved.to(torch::kFloat32).contiguous();
  return compressed_->load_errors(std::span<const float>(t.data_ptr<float>(), size_t(t.numel())));
}

}  // namespace ds::zero
