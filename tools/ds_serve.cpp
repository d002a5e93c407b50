// ds-serve: an OpenAI-compatible HTTP server over the FastGen-style engine (docs/serve.md). Loads a
// Hugging Face model folder (gpt2, llama, mistral, qwen2) with its tokenizer (bytes as tokens when
// the folder has none), then answers /v1/completions and /v1/chat/completions (streamed with
// server-sent events on request) from many connections through one continuous-batching engine.
// SIGTERM or SIGINT: new requests get 503, in-flight ones finish, exit 0. Under mpirun -np N with
// --tensor-parallel N the model is cut over the N ranks: rank 0 serves, the others follow its forwards.
//
//   ds-serve --model-dir ./my-gpt2 --port 8000
//   curl localhost:8000/v1/completions -d '{"model":"my-gpt2","prompt":"Hello","max_tokens":16}'
#include <CLI/CLI.hpp>

#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "cli_checks.h"
#include "inference_cli.h"
#include "inference/pipeline.h"
#include "models/pretrained.h"
#include "serve/server.h"
#include "util/blas_core_select.h"
#include "util/error.h"

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "ds-serve");  // before any BLAS call (docs/cpu-kernels.md)
  using namespace ds::serve;
  std::string model_dir;
  bool bf16 = false, no_split = false;
  int64_t step_delay_ms = 0;
  ServerOptions so;
  so.model_name.clear();  // default: the folder's name
  ds::inference::EngineOptions eo;
  CLI::App app{"ds-serve: an OpenAI-compatible HTTP server with continuous batching over a blocked KV cache"};
  app.add_option("--model-dir", model_dir, "a Hugging Face model folder (config.json + safetensors [+ tokenizer])")
      ->required()->check(CLI::ExistingDirectory);
  app.add_option("--host", so.host, "address to listen on")->capture_default_str();
  app.add_option("--port", so.port, "port to listen on (0: any free port, printed at start)")->capture_default_str()
      ->check(ds::tools::whole_number(0, 65535));
  app.add_option("--model-name", so.model_name, "the model id clients send (default: the folder's name)");
  app.add_option("--max-concurrent", so.max_concurrent, "generations in flight at once; more get 429")
      ->capture_default_str()->check(ds::tools::whole_number(1, 4096));
  app.add_option("--max-body-bytes", so.max_body_bytes, "largest request body; larger get 413")
      ->capture_default_str()->check(ds::tools::whole_number(64, int64_t{1} << 32));
  app.add_option("--max-prompt-tokens", so.max_prompt_tokens, "longest prompt in tokens (0: the model's context - 1)")
      ->capture_default_str()->check(ds::tools::whole_number(0, 1 << 30));
  app.add_option("--request-timeout-s", so.request_timeout_s, "a generation running longer is stopped with 503")
      ->capture_default_str()->check(ds::tools::real_number(0.001, 1e7));
  app.add_option("--shutdown-grace-s", so.shutdown_grace_s, "on SIGTERM, in-flight requests get this long to finish")
      ->capture_default_str()->check(ds::tools::real_number(0, 1e7));
  app.add_option("--seed", eo.seed, "seeds of requests that give none are drawn from this")->capture_default_str();
  ds::tools::add_inference_engine_options(app, eo, no_split, bf16);
  int64_t tensor_parallel = 1;
  ds::tools::add_tensor_parallel_option(app, tensor_parallel);
  app.add_option("--step-delay-ms", step_delay_ms, "sleep this long after every engine step (for tests of limits)")
      ->capture_default_str()->check(ds::tools::whole_number(0, 60000));
  CLI11_PARSE(app, argc, argv);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);  // as ds-generate: keep the forward's temporaries mapped
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  eo.scheduler.split_prompts = !no_split;
  if (so.model_name.empty())
    so.model_name = std::filesystem::path(model_dir).lexically_normal().filename().string();
  if (so.model_name.empty())  // "dir/" has an empty filename
    so.model_name = std::filesystem::path(model_dir).lexically_normal().parent_path().filename().string();

  // Signals go to one thread that drains the server; block them before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not a dead server

  try {
    auto tp = ds::tools::tensor_parallel_world(tensor_parallel, "ds-serve");
    eo.tensor_parallel = tp.get();
    ds::models::PretrainedOptions po;
    po.dtype = bf16 ? torch::kBFloat16 : torch::kFloat32;
    auto model = ds::models::from_pretrained(model_dir, po);
    model->eval();
    const auto cfg = model->hf_config();
    eo.eos_token_ids = ds::inference::eos_token_ids(cfg, cfg.value("vocab_size", int64_t{0}));
    auto engine = std::make_unique<ds::inference::InferenceEngine>(model, eo);
    if (engine->is_follower()) {  // ranks 1..: run rank 0's forwards until its server stops
      engine->follow();
      return 0;
    }
    const ds::data::TextCodec codec = ds::data::TextCodec::from_model_dir(model_dir);
    Metrics metrics;
    declare_serve_metrics(metrics);
    ServingLoop loop(std::move(engine), metrics, {std::chrono::milliseconds(step_delay_ms)});
    Server server(so, loop, codec, metrics);
    const int port = server.bind();
    std::printf("ds-serve: listening on http://%s:%d (model '%s', %s; context %lld tokens, %lld KV blocks of %lld%s)\n",
                so.host.c_str(), port, so.model_name.c_str(), codec.describe().c_str(),
                static_cast<long long>(loop.max_positions()), static_cast<long long>(loop.kv_blocks_total()),
                static_cast<long long>(loop.kv_block_size()),
                tensor_parallel > 1 ? ("; tensor-parallel over " + std::to_string(tensor_parallel) + " ranks").c_str() : "");
    std::fflush(stdout);
    std::thread signals([&] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      std::fprintf(stderr, "ds-serve: %s: finishing in-flight requests, then exiting\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      server.shutdown();
    });
    server.serve();
    signals.join();
    loop.stop();
    std::fprintf(stderr, "ds-serve: stopped\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds-serve: %s\n", e.what());
    return 1;
  }
}
