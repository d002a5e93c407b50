#include "inference/pipeline.h"

#include <map>

#include "comm/communicator.h"
#include "inference/tensor_parallel.h"
#include "models/pretrained.h"
#include "util/error.h"

namespace ds::inference {
namespace {

// Completions as JSON, for rank 0 to hand them to the other tensor-parallel ranks.
nlohmann::json to_json(const std::vector<Completion>& out) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : out) {
    nlohmann::json lp = nlohmann::json::array();
    for (const auto& t : c.logprobs) lp.push_back({t.token, t.logprob, t.top});
    j.push_back({{"tokens", c.tokens}, {"logprobs", lp}, {"finish", static_cast<int>(c.finish)},
                 {"prompt_tokens", c.prompt_tokens}});
  }
  return j;
}

std::vector<Completion> completions_from_json(const nlohmann::json& j) {
  std::vector<Completion> out;
  for (const auto& c : j) {
    Completion& o = out.emplace_back();
    o.tokens = c.at("tokens").get<std::vector<int64_t>>();
    for (const auto& t : c.at("logprobs"))
      o.logprobs.push_back({t.at(0).get<int64_t>(), t.at(1).get<double>(),
                            t.at(2).get<std::vector<std::pair<int64_t, double>>>()});
    o.finish = static_cast<FinishReason>(c.at("finish").get<int>());
    o.prompt_tokens = c.at("prompt_tokens").get<int64_t>();
  }
  return out;
}

}  // namespace

std::vector<int64_t> eos_token_ids(const nlohmann::json& hf_config, int64_t vocab_size) {
  std::vector<int64_t> ids;
  auto add = [&](const nlohmann::json& v) {
    if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab_size) ids.push_back(v.get<int64_t>());
  };
  if (auto it = hf_config.find("eos_token_id"); it != hf_config.end()) {
    if (it->is_array()) {
      for (const auto& v : *it) add(v);
    } else {
      add(*it);
    }
  }
  return ids;
}

Pipeline::Pipeline(std::shared_ptr<models::CausalLM> model, EngineOptions options) {
  DS_CHECK(model != nullptr, Error, "Pipeline: no model given");
  if (options.eos_token_ids.empty()) {
    const auto cfg = model->hf_config();
    const int64_t vocab = cfg.value("vocab_size", int64_t{0});
    options.eos_token_ids = eos_token_ids(cfg, vocab);
  }
  engine_ = std::make_unique<InferenceEngine>(std::move(model), std::move(options));
}

Pipeline Pipeline::from_pretrained(const std::string& dir, EngineOptions options, torch::ScalarType dtype) {
  models::PretrainedOptions po;
  po.dtype = dtype;
  auto model = models::from_pretrained(dir, po);
  model->eval();
  return Pipeline(std::move(model), std::move(options));
}

std::vector<Completion> Pipeline::generate(const std::vector<std::vector<int64_t>>& prompts,
                                           const SamplingParams& params) {
  return generate(prompts, std::vector<SamplingParams>(prompts.size(), params));
}

std::vector<Completion> Pipeline::generate(const std::vector<std::vector<int64_t>>& prompts,
                                           const std::vector<SamplingParams>& params) {
  comm::Communicator* tp = engine_->options().tensor_parallel;
  if (tp == nullptr || tp->size() == 1) return run(prompts, params);
  // Rank 0 runs the engine while the others follow its forwards; then everyone gets its result.
  std::vector<Completion> out;
  std::exception_ptr failed;
  std::string error;
  if (engine_->is_follower()) {
    engine_->follow();
  } else {
    try {
      out = run(prompts, params);
    } catch (const std::exception& e) {
      failed = std::current_exception();
      error = e.what();
    }
    engine_->release_followers();
  }
  const auto result = nlohmann::json::parse(
      broadcast_text(*tp, tp->rank() == 0 ? (failed ? nlohmann::json{{"error", error}} : to_json(out)).dump() : ""));
  if (failed) std::rethrow_exception(failed);
  if (result.is_object()) throw Error(result.at("error").get<std::string>());
  return tp->rank() == 0 ? out : completions_from_json(result);
}

std::vector<Completion> Pipeline::run(const std::vector<std::vector<int64_t>>& prompts,
                                      const std::vector<SamplingParams>& params) {
  DS_CHECK(params.size() == prompts.size(), Error,
           "Pipeline::generate: " + std::to_string(params.size()) + " SamplingParams for " +
               std::to_string(prompts.size()) + " prompts (give one per prompt, or one for all)");
  std::map<int64_t, size_t> slot;  // request id → prompt index
  std::vector<Completion> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) slot[engine_->add_request(prompts[i], params[i])] = i;
  size_t done = 0;
  while (done < prompts.size()) {
    auto outputs = engine_->step();
    DS_ASSERT(!outputs.empty() || engine_->has_unfinished(), "engine idle with requests outstanding");
    for (auto& o : outputs) {
      auto it = slot.find(o.id);
      if (it == slot.end()) continue;
      Completion& c = out[it->second];
      c.tokens.insert(c.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      c.logprobs.insert(c.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
      c.prompt_tokens = o.prompt_tokens;
      if (o.finished) {
        c.finish = o.finish;
        ++done;
      }
    }
  }
  return out;
}

}  // namespace ds::inference
