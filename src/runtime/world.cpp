#include "runtime/world.h"

#include <cstdlib>
#include <string>

namespace ds {
namespace {

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    if (const char* v = std::getenv(n)) {
      try {
        return std::stoi(v);
      } catch (...) {
      }
    }
  }
  return fallback;
}

}  // namespace

int detect_rank() { return env_int({"OMPI_COMM_WORLD_RANK", "RANK", "PMI_RANK"}, 0); }
int local_world_size() {
  return env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "MPI_LOCALNRANKS"}, 1);
}
int local_rank() { return env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "MPI_LOCALRANKID"}, 0); }

}  // namespace ds
