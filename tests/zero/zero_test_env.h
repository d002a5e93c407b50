// Shared by the zero_tests files: the run's world and its process topology, built once by main()
// (every rank runs the same tests in the same order, so the collectives inside tests line up).
// Alone the world is a SingleCommunicator; under mpirun -np 2 it is two MPI ranks, and the topology
// with every parallel size 1 makes its data-parallel group (what ZeRO partitions over) that world.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "parallel/topology.h"

namespace ds::zero::test {

parallel::Topology& topology();
// The group ZeRO partitions over: topology().data_parallel().
inline comm::Communicator& dp() { return topology().data_parallel(); }

}  // namespace ds::zero::test
