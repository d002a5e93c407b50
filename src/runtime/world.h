// Rank and world size as the launcher set them (Open MPI, torchrun/DeepSpeed, PMI), before any
// communicator exists. Defaults: rank 0, world 1.
#pragma once

namespace ds {

int detect_world_size();
int detect_rank();
int local_rank();
int local_world_size();  // ranks on this node

}  // namespace ds
