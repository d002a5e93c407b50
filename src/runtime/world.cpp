#include "runtime/world.h"

#include <cstdlib>
#include <string>
#include <algorithm>

#include "util/error.h"

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
int ranks_per_node() {
  const char* v = std::getenv("DS_RANKS_PER_NODE");
  if (v == nullptr) return std::max(1, local_world_size());
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > 1 << 20)
    throw ConfigError("DS_RANKS_PER_NODE", std::string("must be a positive whole number of ranks, got \"") + v + "\"");
  return int(n);
}

int local_rank() { return env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "MPI_LOCALRANKID"}, 0); }

}  // namespace ds
