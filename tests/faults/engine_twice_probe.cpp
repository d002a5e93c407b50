// Item 13's reproduction: a program that builds an engine, trains a step, destroys it and builds a second
// one in the same process. At 2 ranks the second ds::initialize failed ("MPI was already finalized").
#include <deepspeed/deepspeed.h>

#include <cstdio>

#include "models/gpt2.h"

namespace {

double one_step() {
  auto c = ds::models::GPT2Config::preset("tiny");
  c.n_layer = 1;
  c.n_embd = 16;
  c.n_head = 2;
  c.n_positions = 8;
  torch::manual_seed(5);
  auto engine = ds::initialize(ds::models::GPT2(c), nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 1,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 2}})"));
  auto x = torch::randint(0, c.vocab_size, {1, 8});
  engine.backward(engine.forward(x, x));
  engine.step();
  return engine.last_loss();
}

}  // namespace

int main() {
  try {
    const double first = one_step();
    const double second = one_step();
    std::printf("engine_twice: ok %.6f %.6f\n", first, second);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_twice: error: %s\n", e.what());
    return 1;
  }
}
