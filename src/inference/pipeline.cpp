#include "inference/pipeline.h"

#include <map>
#include <type_traits>

#include "comm/agreement.h"
#include "comm/communicator.h"
#include "inference/tensor_parallel.h"
#include "inference/text_stream.h"
#include "models/pretrained.h"
#include "util/error.h"

namespace ds::inference {
namespace {

// Results as JSON, for rank 0 to hand them to the other tensor-parallel ranks.
nlohmann::json logprobs_json(const std::vector<TokenLogprob>& logprobs) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& t : logprobs) j.push_back({t.token, t.logprob, t.top});
  return j;
}

std::vector<TokenLogprob> logprobs_from(const nlohmann::json& j) {
  std::vector<TokenLogprob> out;
  for (const auto& t : j)
    out.push_back({t.at(0).get<int64_t>(), t.at(1).get<double>(), t.at(2).get<std::vector<std::pair<int64_t, double>>>()});
  return out;
}

template <typename C>
nlohmann::json to_json(const std::vector<C>& out) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : out) {
    j.push_back({{"tokens", c.tokens}, {"logprobs", logprobs_json(c.logprobs)}, {"finish", static_cast<int>(c.finish)},
                 {"prompt_tokens", c.prompt_tokens}});
    if constexpr (std::is_same_v<C, TextCompletion>) j.back()["text"] = c.text;
  }
  return j;
}

template <typename C>
std::vector<C> from_json(const nlohmann::json& j) {
  std::vector<C> out;
  for (const auto& c : j) {
    C& o = out.emplace_back();
    o.tokens = c.at("tokens").get<std::vector<int64_t>>();
    o.logprobs = logprobs_from(c.at("logprobs"));
    o.finish = static_cast<FinishReason>(c.at("finish").get<int>());
    o.prompt_tokens = c.at("prompt_tokens").get<int64_t>();
    if constexpr (std::is_same_v<C, TextCompletion>) o.text = c.at("text").get<std::string>();
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

Pipeline::Pipeline(std::shared_ptr<models::CausalLM> model, EngineOptions options, data::TextCodec codec)
    : codec_(std::move(codec)) {
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
  return Pipeline(std::move(model), std::move(options), data::TextCodec::from_model_dir(dir));
}

void Pipeline::run(const std::vector<std::vector<int64_t>>& prompts, const std::vector<SamplingParams>& params,
                   const std::function<void(size_t, const RequestOutput&)>& on_output) {
  DS_CHECK(params.size() == prompts.size(), Error,
           "Pipeline: " + std::to_string(params.size()) + " SamplingParams for " +
               std::to_string(prompts.size()) + " prompts (give one per prompt, or one for all)");
  std::map<int64_t, size_t> slot;  // request id → prompt index, until the engine reports it finished
  for (size_t i = 0; i < prompts.size(); ++i) slot[engine_->add_request(prompts[i], params[i])] = i;
  while (!slot.empty()) {
    auto outputs = engine_->step();
    DS_ASSERT(!outputs.empty() || engine_->has_unfinished(), "engine idle with requests outstanding");
    for (const auto& o : outputs) {
      auto it = slot.find(o.id);
      if (it == slot.end()) continue;
      on_output(it->second, o);
      if (o.finished) slot.erase(it);
    }
  }
}

std::vector<Completion> Pipeline::generate(const std::vector<std::vector<int64_t>>& prompts,
                                           const SamplingParams& params) {
  return generate(prompts, std::vector<SamplingParams>(prompts.size(), params));
}

nlohmann::json Pipeline::on_every_rank(const std::function<nlohmann::json()>& lead) {
  comm::Communicator* tp = engine_->options().tensor_parallel;
  if (tp == nullptr || tp->size() == 1) return lead();
  nlohmann::json result;
  std::exception_ptr failed;
  if (engine_->is_follower()) {
    engine_->follow();
  } else {
    try {
      result = lead();
    } catch (const std::exception& e) {
      failed = std::current_exception();
      result = {{"error", e.what()}};
    }
    engine_->release_followers();
  }
  const std::string text = tp->rank() == 0 ? result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "";
  result = nlohmann::json::parse(comm::broadcast_text(*tp, text, 0, "tp_inference.result"));
  if (failed) std::rethrow_exception(failed);
  if (result.is_object()) throw Error(result.at("error").get<std::string>());
  return result;
}

std::vector<Completion> Pipeline::generate(const std::vector<std::vector<int64_t>>& prompts,
                                           const std::vector<SamplingParams>& params) {
  return from_json<Completion>(on_every_rank([&] {
    std::vector<Completion> out(prompts.size());
    run(prompts, params, [&](size_t i, const RequestOutput& o) {
      Completion& c = out[i];
      c.tokens.insert(c.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      c.logprobs.insert(c.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
      c.prompt_tokens = o.prompt_tokens;
      if (o.finished) c.finish = o.finish;
    });
    return to_json(out);
  }));
}

std::vector<TextCompletion> Pipeline::generate_text(const std::vector<std::string>& prompts,
                                                    const SamplingParams& params, const std::vector<std::string>& stop) {
  return generate_text(prompts, std::vector<SamplingParams>(prompts.size(), params), stop);
}

std::vector<TextCompletion> Pipeline::generate_text(const std::vector<std::string>& prompts,
                                                    const std::vector<SamplingParams>& params,
                                                    const std::vector<std::string>& stop) {
  return from_json<TextCompletion>(on_every_rank([&] { return to_json(generate_text_here(prompts, params, stop)); }));
}

std::vector<TextCompletion> Pipeline::generate_text_here(const std::vector<std::string>& prompts,
                                                         const std::vector<SamplingParams>& params,
                                                         const std::vector<std::string>& stop) {
  std::vector<std::vector<int64_t>> ids;
  std::vector<TextStream> streams;
  streams.reserve(prompts.size());
  for (const auto& p : prompts) {
    ids.push_back(codec_.encode(p, /*add_special_tokens=*/true));
    streams.emplace_back(codec_, stop);
  }
  std::vector<TextCompletion> out(prompts.size());
  run(ids, params, [&](size_t i, const RequestOutput& o) {
    TextCompletion& c = out[i];
    TextStream& text = streams[i];
    c.prompt_tokens = o.prompt_tokens;
    if (text.stopped()) return;  // the abort's report after a stop string
    for (size_t k = 0; k < o.new_tokens.size() && !text.stopped(); ++k) {
      c.text += text.push(o.new_tokens[k]);
      c.tokens.push_back(o.new_tokens[k]);
      if (k < o.new_logprobs.size()) c.logprobs.push_back(o.new_logprobs[k]);
    }
    if (text.stopped()) {
      engine_->abort(o.id);  // nothing past a stop string is wanted: free the sequence now
      c.finish = FinishReason::kStop;
    } else if (o.finished) {
      c.text += text.finish();
      c.finish = o.finish;
    }
  });
  return out;
}

}  // namespace ds::inference
