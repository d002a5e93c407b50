// Building the world communicator the launcher asked for (comm/comm.h includes this with the
// rest of the layer; the public header includes only this).
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/types.h"

namespace ds::comm {

// The world size the launcher announced: OMPI_COMM_WORLD_SIZE (mpirun), else PMI_SIZE / PMIX_SIZE
// (other MPI launchers), else WORLD_SIZE (torchrun-style), else 1.
int launcher_world_size();
// True when an MPI launcher (Open MPI's mpirun, or a PMI-based one) started this process.
bool launched_by_mpi();

// Auto -> Mpi when launched by mpirun with more than one rank, else Single. Throws ds::CommError
// when WORLD_SIZE > 1 was set by a non-MPI launcher (each process would otherwise train alone).
Backend resolve_backend(Backend requested);

// Builds the communicator for `backend` (resolved as above). Mpi works at world size 1 too.
// Nccl throws ds::NotSupported unless built with DS_WITH_NCCL (docs/gpu.md).
std::unique_ptr<Communicator> make_communicator(Backend backend = Backend::Auto,
                                                const MpiOptions& mpi_options = {});

}  // namespace ds::comm
