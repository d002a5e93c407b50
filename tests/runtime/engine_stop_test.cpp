// Graceful stop across real ranks (issue 22, item 6): a stop asked on one rank — engine.request_stop()
// or a SIGTERM caught by ds::install_stop_signal_handlers() — takes effect on every rank at the same
// accumulation boundary, so all of them can save one checkpoint together.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <csignal>

#include "models/gpt2.h"
#include "models/token_data.h"

namespace ds {
namespace {

// Trains 4 steps of 2 micro-batches; `ask(step, micro)` runs on every rank before each engine.step().
// Returns, per step, whether stop_requested() was true after it.
template <class Ask>
std::vector<bool> train(Ask ask, int* signal = nullptr) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "a stitch in time saves nine " + std::to_string(i) + ". ";
  auto data = models::TokenDataset::from_text(text);
  models::BatchSampler sampler(data, 16, 3);
  torch::manual_seed(3);
  auto engine = initialize(models::GPT2(models::GPT2Config::preset("tiny")), nlohmann::json::parse(R"({
      "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})"));
  std::vector<bool> stopped;
  for (int s = 0; s < 4; ++s) {
    for (int m = 0; m < 2; ++m) {
      auto b = sampler.batch(((s * 2 + m) * engine.world_size() + engine.rank()) * 2, 2);
      engine.backward(engine.forward(b.inputs, b.targets));
      ask(engine, s, m);
      engine.step();
      if (m == 0) {
        EXPECT_EQ(engine.stop_requested(), s >= 2) << "a request takes effect only at a boundary";
      }
    }
    stopped.push_back(engine.stop_requested());
  }
  if (signal) *signal = engine.stop_signal();
  return stopped;
}

TEST(EngineStop, OneRankAsksEveryRankStopsAtTheNextBoundary) {
  int signal = -1;
  const auto stopped = train(
      [](Engine& e, int s, int m) {
        if (s == 1 && m == 0 && e.rank() == e.world_size() - 1) e.request_stop();
      },
      &signal);
  EXPECT_EQ(stopped, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(signal, 0);
}

TEST(EngineStop, SigtermOnOneRankStopsEveryRankAndNamesIt) {
  install_stop_signal_handlers();
  int signal = -1;
  const auto stopped = train(
      [](Engine& e, int s, int m) {
        if (s == 1 && m == 0 && e.rank() == 0) std::raise(SIGTERM);  // the handler records it; nothing dies
      },
      &signal);
  uninstall_stop_signal_handlers();
  EXPECT_EQ(stopped, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(signal, SIGTERM);
}

}  // namespace
}  // namespace ds
