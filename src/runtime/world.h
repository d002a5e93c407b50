// Rank and local ranks as the launcher set them (Open MPI, torchrun/DeepSpeed, PMI), before any
// communicator exists. Defaults: rank 0, one local rank. The world size is comm::launcher_world_size().
#pragma once

namespace ds {

int detect_rank();
int local_rank();
int local_world_size();  // ranks on this node
// Ranks per node for hierarchical collectives: DS_RANKS_PER_NODE when set (several simulated nodes
// on one machine), else local_world_size(). Ranks fill nodes in order: node = rank / ranks_per_node().
// A DS_RANKS_PER_NODE that is not a positive integer is a ds::ConfigError.
int ranks_per_node();

}  // namespace ds
