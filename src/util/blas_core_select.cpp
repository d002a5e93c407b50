#include "util/blas_core_select.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ds {
namespace {

// OPENBLAS_CORETYPE as the user's value, or nullptr when unset, empty or chosen by a ds program.
const char* user_core_value() {
  const char* value = std::getenv(kOpenBlasCoreVar);
  const char* chosen = std::getenv(kCoreChosenVar);
  if (value == nullptr || *value == '\0') return nullptr;
  if (chosen != nullptr && std::strcmp(chosen, value) == 0) return nullptr;
  return value;
}

void set_chosen(const std::string& core) {
  setenv(kOpenBlasCoreVar, core.c_str(), 1);
  setenv(kCoreChosenVar, core.c_str(), 1);
}

// One line per job, not per rank: MPI ranks other than 0 stay quiet.
void say(const char* tool, const std::string& line) {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* rank = std::getenv(var);
    if (rank != nullptr) {
      if (std::strcmp(rank, "0") != 0) return;
      break;
    }
  }
  std::fprintf(stderr, "%s: %s\n", tool, line.c_str());
}

// True when the decision is to set the core; otherwise says its line (a kept user value, another
// BLAS, no vector units) unless the core is already the best.
bool to_be_set(const BlasCoreDecision& d, const char* tool) {
  if (d.action == BlasCoreAction::kSet) return true;
  if (d.action != BlasCoreAction::kAlreadyBest) say(tool, d.message);
  return false;
}

}  // namespace

BlasCoreDecision current_blas_core_decision() {
  return decide_blas_core(detect_cpu_features(), probe_loaded_blas(), user_core_value());
}

void select_blas_core_or_reexec(char** argv, const char* tool) {
  const BlasCoreDecision d = current_blas_core_decision();
  if (!to_be_set(d, tool)) return;
  if (std::getenv(kReexecVar) != nullptr) {  // already re-executed once: OpenBLAS did not take the name
    say(tool, "OpenBLAS ignored " + std::string(kOpenBlasCoreVar) + "=" + d.core + " (" + d.message + ")");
    return;
  }
  set_chosen(d.core);
  setenv(kReexecVar, "1", 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
  say(tool, "could not restart with " + std::string(kOpenBlasCoreVar) + "=" + d.core + " (" + std::strerror(errno) +
                "): " + d.message + "; set it before starting");
}

void export_blas_core_for_ranks(const char* tool) {
  const BlasCoreDecision d = decide_blas_core(detect_cpu_features(), probe_blas_library(), user_core_value());
  if (to_be_set(d, tool)) set_chosen(d.core);
}

}  // namespace ds
