// Rank and local ranks as the launcher set them (Open MPI, torchrun/DeepSpeed, PMI), before any
// communicator exists. Defaults: rank 0, one local rank. The world size is comm::launcher_world_size().
#pragma once

namespace ds {

int detect_rank();
int local_rank();
int local_world_size();  // ranks on this node

}  // namespace ds
