// ds-generate: one-shot generation with the FastGen-style engine (docs/inference.md). Loads a
// Hugging Face model folder (gpt2, llama, mistral, qwen2) or builds a random GPT-2 preset, runs all
// prompts together through continuous batching, and prints each completion. Text goes through the
// folder's tokenizer (tokenizer.json / tokenizer.model) when it has one, else bytes are tokens
// (byte b is token b, as for --preset); --stop strings are matched on the decoded text.
//
//   ds-generate --preset tiny --prompt "Hello" --prompt "The quick" --max-tokens 32 --temperature 0
//   ds-generate --model-dir ./my-gpt2 --prompt "Once" --top-p 0.9 --seed 7 --stop "." --json
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "inference_cli.h"
#include "inference/pipeline.h"
#include "models/gpt2.h"
#include "util/error.h"
#include "util/blas_core_select.h"

namespace {

// Text for a terminal line: backslash and line breaks escaped, other control bytes as \xNN;
// everything else (UTF-8 included) as it is.
std::string escape_text(const std::string& text) {
  std::string s;
  for (unsigned char c : text) {
    if (c == '\\') s += "\\\\";
    else if (c == '\n') s += "\\n";
    else if (c < 0x20 || c == 0x7f) { char b[8]; std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned>(c)); s += b; }
    else s += static_cast<char>(c);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "ds-generate");  // before any BLAS call (docs/cpu-kernels.md)
  using namespace ds::inference;
  std::string model_dir, preset;
  std::vector<std::string> prompts, stops;
  uint64_t init_seed = 0;
  bool json = false, bf16 = false, no_split = false;
  int64_t seed = -1, logprobs = -1;
  SamplingParams sp;
  EngineOptions eo;
  CLI::App app{"ds-generate: generate for a batch of prompts with continuous batching over a blocked KV cache"};
  auto* dir_opt = app.add_option("--model-dir", model_dir, "a Hugging Face model folder (config.json + safetensors)");
  app.add_option("--preset", preset, "instead: a randomly initialised GPT-2 preset (tiny, small, ...)")->excludes(dir_opt);
  app.add_option("--init-seed", init_seed, "with --preset: the weights' seed")->capture_default_str();
  app.add_option("--prompt", prompts, "a prompt (repeat for a batch); encoded by the folder's tokenizer, else bytes")
      ->required();
  app.add_option("--max-tokens", sp.max_tokens, "tokens to generate at most")->capture_default_str()
      ->check(ds::tools::whole_number(1, 1 << 20));
  app.add_option("--temperature", sp.temperature, "0 is greedy")->capture_default_str()
      ->check(ds::tools::real_number(0, 100));
  app.add_option("--top-k", sp.top_k, "0 is off")->capture_default_str()->check(ds::tools::whole_number(0, 1 << 30));
  app.add_option("--top-p", sp.top_p, "1 is off")->capture_default_str()->check(ds::tools::real_number(1e-9, 1));
  app.add_option("--repetition-penalty", sp.repetition_penalty, "1 is off")->capture_default_str()
      ->check(ds::tools::real_number(1e-3, 1e3));
  app.add_option("--seed", seed, "sampling seed for every prompt (default: the engine's)")
      ->check(ds::tools::whole_number(0, INT64_MAX));
  app.add_option("--stop", stops, "a stop string, matched on the decoded text (repeatable); the text ends before it");
  app.add_option("--stop-token", sp.stop_token_ids, "a stop token id (repeatable)");
  app.add_flag("--ignore-eos", sp.ignore_eos, "keep generating past the model's eos_token_id");
  app.add_option("--logprobs", logprobs, "print each token's logprob and this many alternatives")
      ->check(ds::tools::whole_number(0, 20));
  ds::tools::add_inference_engine_options(app, eo, no_split, bf16);
  int64_t tensor_parallel = 1;
  ds::tools::add_tensor_parallel_option(app, tensor_parallel);
  app.add_flag("--json", json, "one JSON object per prompt");
  CLI11_PARSE(app, argc, argv);
  // Keep freed heap memory mapped: each forward's temporaries would otherwise fault in fresh pages.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  eo.scheduler.split_prompts = !no_split;
  if (seed >= 0) sp.seed = static_cast<uint64_t>(seed);
  if (logprobs >= 0) sp.logprobs = logprobs;

  try {
    if (model_dir.empty() && preset.empty())
      throw ds::Error("give --model-dir DIR (a Hugging Face folder) or --preset NAME (a random GPT-2)");
    auto tp = ds::tools::tensor_parallel_world(tensor_parallel, "ds-generate");
    eo.tensor_parallel = tp.get();
    const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat32;
    auto load = [&]() -> Pipeline {
      if (!model_dir.empty()) return Pipeline::from_pretrained(model_dir, eo, dtype);
      torch::manual_seed(init_seed);
      auto model = std::make_shared<ds::models::GPT2Impl>(ds::models::GPT2Config::preset(preset));
      model->to(dtype);
      model->eval();
      return Pipeline(model, eo);
    };
    Pipeline pipe = load();
    const auto t0 = std::chrono::steady_clock::now();
    auto out = pipe.generate_text(prompts, sp, stops);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (pipe.engine().is_follower()) return 0;  // rank 0 prints what every rank got
    int64_t generated = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const auto& c = out[i];
      generated += static_cast<int64_t>(c.tokens.size());
      if (json) {
        nlohmann::json j = {{"index", i}, {"prompt", prompts[i]}, {"tokens", c.tokens},
                            {"text", c.text}, {"finish_reason", to_string(c.finish)},
                            {"prompt_tokens", c.prompt_tokens}};
        if (!c.logprobs.empty()) {
          auto& lp = j["logprobs"] = nlohmann::json::array();
          for (const auto& t : c.logprobs) lp.push_back({{"token", t.token}, {"logprob", t.logprob}, {"top", t.top}});
        }
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("[%zu] %s|%s  (%s, %zu tokens)\n", i, escape_text(prompts[i]).c_str(), escape_text(c.text).c_str(),
                    to_string(c.finish).c_str(), c.tokens.size());
        for (const auto& t : c.logprobs) std::printf("      %6lld %9.4f\n", static_cast<long long>(t.token), t.logprob);
      }
    }
    const auto st = pipe.engine().stats();
    std::fprintf(stderr, "%zu prompts, %lld tokens generated in %.3f s (%.1f tokens/s); %lld forwards, %lld preemptions%s\n",
                 out.size(), static_cast<long long>(generated), secs, secs > 0 ? generated / secs : 0.0,
                 static_cast<long long>(st.steps), static_cast<long long>(st.preemptions),
                 tensor_parallel > 1 ? (", tensor-parallel over " + std::to_string(tensor_parallel) + " ranks").c_str() : "");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds-generate: %s\n", e.what());
    return 1;
  }
}
