// An engine given its communicator or its whole process topology (EngineOptions, issue 14 item 2)
// trains exactly as the default one, which builds both itself: the same losses and the same final
// parameters, bit for bit, at every world size ctest runs (1, and 2 and 4 under mpirun), at ZeRO
// stages 2 and 3 (gradients averaged and states partitioned over the given data-parallel group).
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include "comm/comm.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "parallel/topology.h"
#include "zero/gathered_parameters.h"
#include "zero/model_states.h"

namespace ds {
namespace {

// ModelEngine's forward over an engine built with explicit EngineOptions.
class GivenPartsEngine : public Engine {
 public:
  GivenPartsEngine(std::shared_ptr<models::GPT2Impl> model, Config config, EngineOptions options)
      : Engine(model, std::move(config), std::move(options)), model_(std::move(model)) {}
  torch::Tensor forward(const torch::Tensor& inputs, const torch::Tensor& targets) {
    before_forward();
    auto out = model_->forward(inputs, targets);
    after_forward();
    return out;
  }

 private:
  std::shared_ptr<models::GPT2Impl> model_;
};

struct TrainRun {
  std::vector<double> losses;
  std::vector<torch::Tensor> params;
};

enum class Given { Nothing, Communicator, Topology };

TrainRun train(int stage, Given given) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "one good turn deserves another " + std::to_string(i * 7 % 31) + ". ";
  auto data = models::TokenDataset::from_text(text);
  models::BatchSampler sampler(data, 16, 11);
  torch::manual_seed(11);
  auto model = models::GPT2(models::GPT2Config::preset("tiny"));
  const std::string json = fmt::format(R"({{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
      "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-3}}}},
      "zero_optimization": {{"stage": {}, "reduce_bucket_size": 5000, "stage3_param_persistence_threshold": 0}}}})",
                                       stage);
  Config config = load_config_text(json, comm::launcher_world_size(), "<test>");
  std::shared_ptr<comm::Communicator> world;
  std::shared_ptr<parallel::Topology> topology;
  std::unique_ptr<Engine> engine;
  std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> forward;
  if (given == Given::Nothing) {
    auto e = std::make_unique<ModelEngine<models::GPT2Impl>>(model.ptr(), std::move(config));
    forward = [e = e.get()](const torch::Tensor& x, const torch::Tensor& y) { return e->forward(x, y); };
    engine = std::move(e);
  } else {
    world = comm::make_communicator(comm::Backend::Auto);
    EngineOptions options;
    options.layers = &model->layers();
    if (given == Given::Communicator) options.comm = world;
    else options.topology = topology = std::make_shared<parallel::Topology>(world);
    auto e = std::make_unique<GivenPartsEngine>(model.ptr(), std::move(config), std::move(options));
    forward = [e = e.get()](const torch::Tensor& x, const torch::Tensor& y) { return e->forward(x, y); };
    engine = std::move(e);
    EXPECT_EQ(&engine->communicator(), world.get()) << "the engine runs on the communicator it was given";
    if (topology) {
      EXPECT_EQ(&engine->topology(), topology.get()) << "and on the topology it was given";
    }
  }
  const int w = engine->world_size(), rank = engine->rank();
  TrainRun run;
  for (int s = 0; s < 3; ++s) {
    for (int m = 0; m < 2; ++m) {
      auto b = sampler.batch(((s * 2 + m) * w + rank) * 2, 2);
      engine->backward(forward(b.inputs, b.targets));
      engine->step();
    }
    run.losses.push_back(engine->last_loss());
  }
  zero::GatheredParameters full(*engine);
  for (const auto& p : model->parameters()) run.params.push_back(p.detach().clone());
  return run;
}

class EngineGivenParts : public ::testing::TestWithParam<int> {};

TEST_P(EngineGivenParts, TrainsBitIdenticallyToTheDefault) {
  const TrainRun base = train(GetParam(), Given::Nothing);
  for (Given given : {Given::Communicator, Given::Topology}) {
    const TrainRun run = train(GetParam(), given);
    EXPECT_EQ(run.losses, base.losses) << (given == Given::Topology ? "topology" : "communicator");
    ASSERT_EQ(run.params.size(), base.params.size());
    for (size_t i = 0; i < base.params.size(); ++i)
      EXPECT_TRUE(torch::equal(run.params[i], base.params[i])) << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, EngineGivenParts, ::testing::Values(2, 3));

}  // namespace
}  // namespace ds
