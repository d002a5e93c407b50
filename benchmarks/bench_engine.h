// Shared by the multi-rank engine benchmarks (zero_scaling, tp_sp): the timed training loop and the
// model-state bytes the engine's ledger holds.
#pragma once

#include <deepspeed/deepspeed.h>

#include <chrono>

#include "util/memory_ledger.h"

namespace ds::bench {

// Runs warmup + steps optimizer steps of `engine` on batch(step) (ids used as inputs and targets)
// and returns the seconds the measured steps took, between barriers over the world.
template <class Engine, class BatchFn>
double timed_steps(Engine& engine, int warmup, int steps, BatchFn batch) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point t0;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      engine.communicator().barrier();
      t0 = Clock::now();
    }
    auto idx = batch(s);
    engine.backward(engine.forward(idx, idx));
    engine.step();
  }
  engine.communicator().barrier();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Parameters + gradients + fp32 master + optimizer state on every tier: DESIGN §5's model states.
inline double model_state_bytes(const MemoryLedger& m) {
  return double(m.kind_total(MemKind::Params) + m.kind_total(MemKind::Grads) + m.kind_total(MemKind::Master) +
                m.kind_total(MemKind::OptimizerState));
}

}  // namespace ds::bench
