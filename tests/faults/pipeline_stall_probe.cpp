// A pipeline whose last stage hangs in the middle of a batch (its data iterator never returns on
// the second step): the first stage, waiting for a gradient, must end the job through the comm
// watchdog, whose report names the pipe instruction it was waiting in. Run by
// FaultMpi.PipelineStageThatHangsEndsTheJob under mpirun -np 2 with a short DS_COMM_TIMEOUT_S.
#include <deepspeed/deepspeed.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "models/causal_lm.h"
#include "models/gpt2.h"

int main() {
  try {
    auto c = ds::models::GPT2Config::preset("tiny");
    c.n_positions = 8;
    torch::manual_seed(5);
    auto engine = ds::initialize_pipeline(
        ds::models::GPT2(c).ptr(),
        ds::load_config_text(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
            "pipeline": {"stages": 2}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})",
                             ds::comm::launcher_world_size()),
        {"parameters", ds::models::lm_loss});
    for (int step = 0; step < 3; ++step) {
      engine.train_batch([&] {
        if (step == 1 && engine.is_last_stage()) {
          std::fprintf(stderr, "pipeline_stall: last stage hangs\n");
          std::this_thread::sleep_for(std::chrono::hours(1));
        }
        auto x = torch::randint(0, c.vocab_size, {1, 8});
        return ds::PipeBatch{x, x};
      });
      std::printf("pipeline_stall: step %d done on stage %d\n", step, engine.stage_id());
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_stall: error: %s\n", e.what());
    return 1;
  }
}
