// finalize_mpi_for_exit: for a process that ends itself with std::exit while communicators still
// exist (an autotuning experiment, runtime/autotuning_probe.h), so mpirun sees a clean exit rather
// than "exiting improperly". Every rank calls it, with no collective in flight.
#pragma once

namespace ds::comm {

// Finalizes MPI if it is initialized and not finalized yet.
void finalize_mpi_for_exit();

}  // namespace ds::comm
