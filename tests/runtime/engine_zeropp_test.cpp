// ZeRO++ qwZ (zero_quantized_weights) in the engine (distributed_tests, worlds 2 and 4): stage 3 with
// the parameter all-gathers moving int8 tracks the full-precision stage 3 run within 1% per step,
// with at most 0.55 of a bf16 gather's wire bytes.
#include <gtest/gtest.h>

#include <cstdio>

#include "parallel_equivalence.h"

namespace ds {
namespace {

using namespace partest;

std::string stage3_config(bool quantized) {
  return fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {},
      "gradient_clipping": {}, "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-3, "weight_decay": 0.01}}}},
      "zero_optimization": {{"stage": 3, "reduce_bucket_size": 4000, "stage3_param_persistence_threshold": 0,
                             "zero_quantized_weights": {}}}}})",
                     kMicro, kGas, kClip, quantized);
}

struct Trained {
  std::vector<double> losses;
  double gather_wire_bytes = 0;
};

Trained train(bool quantized) {
  const int world = comm::launcher_world_size();
  auto engine = initialize(make_model("tiny"), load_config_text(stage3_config(quantized), world, "<qwZ>"));
  auto data = corpus();
  models::BatchSampler sampler(data, kSeqLen, 7);
  const int d = engine.topology().data().rank();
  Trained run;
  for (int step = 0; step < 12; ++step) {
    for (int k = 0; k < kGas; ++k) {
      auto b = batch_for(sampler, step, k, d, world);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    run.losses.push_back(engine.last_loss());
  }
  run.gather_wire_bytes = double(engine.topology().data().collective_log().sum_wire_bytes("gather_parameters"));
  return run;
}

TEST(ZeroPlusPlus, QuantizedWeightGathersTrackFullPrecision) {
  if (comm::launcher_world_size() == 1) GTEST_SKIP() << "nothing is gathered at world size 1";
  const Trained full = train(false), qwz = train(true);
  for (size_t i = 0; i < full.losses.size(); ++i)
    EXPECT_NEAR(qwz.losses[i], full.losses[i], 0.01 * full.losses[i]) << "step " << i;
  EXPECT_NE(qwz.losses.back(), full.losses.back()) << "the gathered copies do carry int8 rounding";
  // The full-precision run gathers fp32: a bf16 gather moves half of its bytes.
  const double bf16_bytes = full.gather_wire_bytes / 2;
  if (comm::launcher_world_size() > 1)
    std::printf("qwZ: gathers moved %.0f wire bytes, a bf16 gather %.0f (ratio %.4f)\n", qwz.gather_wire_bytes,
                bf16_bytes, qwz.gather_wire_bytes / bf16_bytes);
  EXPECT_LE(qwz.gather_wire_bytes, 0.55 * bf16_bytes);
  EXPECT_GE(qwz.gather_wire_bytes, 0.5 * bf16_bytes) << "int8 is half of bf16; scales and padding come on top";
}

}  // namespace
}  // namespace ds
