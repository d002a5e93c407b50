// engine_overhead: tokens/s of a GPT-2 training step through ds::Engine (fp32, stage 0) against a
// plain LibTorch loop (torch::optim::AdamW) on the same model size, data and batch, in one run.
// Steps alternate ours/reference so machine noise hits both alike. Target: ratio >= 0.97.
#include <deepspeed/deepspeed.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "models/gpt2.h"
#include "models/token_data.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"engine_overhead: ds::Engine step vs a plain LibTorch AdamW loop (GPT-2)"};
  std::string model_name = "small";
  int steps = 6, warmup = 1, batch = 2, seq = 128;
  app.add_option("--model", model_name)->capture_default_str();
  app.add_option("--steps", steps, "measured steps per side")->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--seq", seq)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto mc = ds::models::GPT2Config::preset(model_name);
  std::string text;
  for (int i = 0; text.size() < 200000; ++i) text += fmt::format("sample text line {} with words. ", i * 7919 % 100003);
  auto data = ds::models::TokenDataset::from_text(text);
  ds::models::BatchSampler sampler(data, seq, 7);

  torch::manual_seed(0);
  auto ref_model = ds::models::GPT2(mc);
  torch::optim::AdamW ref_opt(ref_model->parameters(),
                              torch::optim::AdamWOptions(1e-4).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
  torch::manual_seed(0);
  auto engine = ds::initialize(ds::models::GPT2(mc), nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": {}, "gradient_clipping": 0.0,
      "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-4, "weight_decay": 0.01}}}}}})", batch)));

  std::vector<double> ours, ref;
  for (int i = 0; i < warmup + steps; ++i) {
    auto b = sampler.batch(int64_t{i} * batch, batch);
    auto t0 = std::chrono::steady_clock::now();
    ref_opt.zero_grad();
    ref_model->forward(b.inputs, b.targets).backward();
    ref_opt.step();
    double tr = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    engine.backward(engine.forward(b.inputs, b.targets));
    engine.step();
    double to = seconds_since(t0);
    if (i >= warmup) {
      ref.push_back(tr);
      ours.push_back(to);
    }
  }
  const double tokens = static_cast<double>(batch) * seq;
  const double ours_tps = tokens / median(ours), ref_tps = tokens / median(ref);
  fmt::print("engine_overhead: {} ({}), batch {} x seq {}, {} measured steps each, threads {}\n",
             model_name, mc.describe(), batch, seq, steps, torch::get_num_threads());
  fmt::print("{:<34}{:>14}{:>14}{:>10}\n", "measure", "ours", "reference", "ratio");
  fmt::print("{:<34}{:>14.3f}{:>14.3f}{:>10.3f}\n", "median step time (s)", median(ours), median(ref),
             median(ours) / median(ref));
  fmt::print("{:<34}{:>14.1f}{:>14.1f}{:>10.3f}\n", "tokens/s (higher is better)", ours_tps, ref_tps,
             ours_tps / ref_tps);
  fmt::print("BENCH engine_overhead ours={:.1f} ref={:.1f} unit=tokens_per_s ratio={:.3f}\n", ours_tps, ref_tps,
             ours_tps / ref_tps);
  return 0;
}
