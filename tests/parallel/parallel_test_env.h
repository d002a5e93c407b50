// Shared by the parallel_tests files: the run's world communicator, built once by main() (every rank
// runs the same tests in the same order, so the collectives inside tests line up).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace ds::parallel::test {

// MpiCommunicator under mpirun with > 1 rank, else SingleCommunicator.
std::shared_ptr<comm::Communicator> world();

}  // namespace ds::parallel::test
