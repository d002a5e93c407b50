// Backend selection (see make_communicator.h).
#include "comm/make_communicator.h"
#include "comm/single_communicator.h"

#include <cstdlib>
#include <string>

#include "util/error.h"

#ifdef DS_WITH_NCCL
#include "comm/nccl_communicator.h"
#endif

namespace ds::comm {
namespace {

// The launcher's variable as a positive int, or 0 when unset or malformed.
int env_size(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end != v && *end == '\0' && n > 0 && n < (1L << 30)) ? int(n) : 0;
}

}  // namespace

bool launched_by_mpi() {
  return env_size("OMPI_COMM_WORLD_SIZE") > 0 || env_size("PMI_SIZE") > 0 || env_size("PMIX_SIZE") > 0;
}

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "WORLD_SIZE"})
    if (int n = env_size(name)) return n;
  return 1;
}

Backend resolve_backend(Backend requested) {
  if (requested != Backend::Auto) return requested;
  const int world = launcher_world_size();
  if (launched_by_mpi()) return world > 1 ? Backend::Mpi : Backend::Single;
  DS_CHECK(world <= 1, CommError,
           "WORLD_SIZE=" + std::to_string(world) +
               " is set but this process was not started by an MPI launcher; deepspeed.cpp's CPU "
               "communicator is MPI: launch with `mpirun -np " + std::to_string(world) +
               " ...` or ds-run (or unset WORLD_SIZE for a single process)");
  return Backend::Single;
}

std::unique_ptr<Communicator> make_communicator(Backend backend, const MpiOptions& mpi_options) {
  switch (resolve_backend(backend)) {
    case Backend::Mpi: return std::make_unique<MpiCommunicator>(mpi_options);
    case Backend::Nccl:
#ifdef DS_WITH_NCCL
      return std::make_unique<NcclCommunicator>(NcclOptions{});
#else
      throw NotSupported(
          "comm backend \"nccl\" needs a GPU build (configure with -DDS_WITH_NCCL=ON, or -DDS_WITH_CUDA=ON, with "
          "the CUDA toolkit and NCCL installed); this build has the \"single\" and \"mpi\" backends");
#endif
    case Backend::Single:
    case Backend::Auto:
      break;
  }
  return std::make_unique<SingleCommunicator>();
}

}  // namespace ds::comm
