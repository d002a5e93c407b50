#include "inference/ragged_model.h"

#include "util/error.h"

namespace ds::inference {

std::unique_ptr<RaggedModel> make_ragged_model(std::shared_ptr<models::CausalLM> model) {
  DS_CHECK(model != nullptr, Error, "inference: no model given");
  const std::string type = model->model_type();
  if (type == "gpt2") return make_gpt2_ragged(std::move(model));
  if (type == "llama" || type == "mistral" || type == "qwen2") return make_llama_ragged(std::move(model));
  if (type == "opt") return make_opt_ragged(std::move(model));
  throw NotSupported("inference: model_type \"" + type +
                     "\" has no ragged (KV-cached) forward yet; supported: gpt2, llama, mistral, qwen2, opt");
}

}  // namespace ds::inference
