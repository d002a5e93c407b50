// The sizes a Topology is built from, and their resolution against the world size. The data-parallel
// size is not given: it is what is left, world / (pipe x tensor x sequence), as in DeepSpeed.
//
// Config wiring: config/ reads `pipeline.stages`, `tensor_parallel.autotp_size` and
// `sequence_parallel_size` into Config::parallel_sizes (and resolves the batch triple for the
// data-parallel world they leave); the engine builder builds its Topology from them. Sizes above 1
// are refused by config/ until their components (tensor, sequence, pipeline parallelism) land.
#pragma once

#include <string>

namespace ds::parallel {

struct TopologySizes {
  int pipe = 1;      // pipeline stages: PipelineModule's num_stages (config `pipeline.stages`)
  int tensor = 1;    // tensor (model) parallel: `tensor_parallel.autotp_size`
  int sequence = 1;  // Ulysses sequence parallel: `sequence_parallel_size`
  int expert = 1;    // expert parallel: DeepSpeed's MoE(ep_size=...), not a config key; splits data
};

// The resolved grid: every size >= 1 and world == pipe * data * sequence * model.
struct TopologyShape {
  int world = 1;
  int pipe = 1;
  int data = 1;
  int sequence = 1;
  int model = 1;   // = TopologySizes::tensor (DeepSpeed names the axis "model")
  int expert = 1;  // divides data
  bool trivial() const noexcept { return world == data; }  // plain data parallelism over the world
};

// Throws ds::ConfigError naming the key and the arithmetic when a size is < 1 or the sizes do not
// divide the world ("tensor_parallel.autotp_size: world 6 is not divisible by autotp_size 4 ..."),
// and ds::NotSupported for expert > 1 together with sequence > 1.
TopologyShape resolve_shape(int world, const TopologySizes& sizes);

// Throws ConfigError("train_batch_size") when the config's batch triple was resolved for another
// world size than the one running (a config loaded by hand for the wrong world).
void check_batch_world(int resolved_for, int running);

// "num_stages 2, autotp_size 2, sequence_parallel_size 1, ep_size 1"
std::string describe(const TopologySizes& sizes);

}  // namespace ds::parallel
