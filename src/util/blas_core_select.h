// Acting on util/blas_core.h's decision at program start. OpenBLAS reads OPENBLAS_CORETYPE once,
// in a constructor, when the library loads: a tool that finds a slower core than the CPU allows
// sets the variable and execs itself once (before LibTorch, MPI or threads start) so the new image
// loads OpenBLAS with it. DS_OPENBLAS_CORETYPE_CHOSEN marks a value a ds tool or ds-run chose (any
// program may re-decide it); DS_OPENBLAS_REEXEC marks the one re-exec, so it never loops.
#pragma once

#include "util/blas_core.h"

namespace ds {

inline constexpr const char* kReexecVar = "DS_OPENBLAS_REEXEC";

// The decision for this process now: the loaded BLAS, the CPU, and OPENBLAS_CORETYPE unless
// DS_OPENBLAS_CORETYPE_CHOSEN says a ds program chose it (then it is re-decided, not the user's).
BlasCoreDecision current_blas_core_decision();

// First call in every tool's main. When the decision is kSet it sets OPENBLAS_CORETYPE and the
// markers and execs /proc/self/exe with argv (returns only if that fails, after saying so). Any
// other outcome that the user should know (their value kept, another BLAS, no AVX2, OpenBLAS
// refusing the name after the re-exec) is one line on stderr prefixed with `tool`.
void select_blas_core_or_reexec(char** argv, const char* tool);

// ds-run: decides from the BLAS a program here would load (libblas.so.3) and sets the variable and
// DS_OPENBLAS_CORETYPE_CHOSEN in this process's environment, which its ranks inherit (and which
// ds-run forwards to remote hosts; a rank there that is a ds tool re-decides for its own CPU).
void export_blas_core_for_ranks(const char* tool);

}  // namespace ds
