// Which environment variables the ranks receive through `-x`. mpirun gives local ranks its whole
// environment but remote ranks only what `-x` names, so we name what a training run depends on:
// our DS_* knobs, OpenMP, OpenBLAS (a user's OPENBLAS_CORETYPE), NCCL and UCX settings, PATH and LD_LIBRARY_PATH, and DeepSpeed's own
// export prefixes (runner.py EXPORT_ENVS: MLFLOW, PYTHON, MV2, UCX), plus the KEY=VALUE lines of
// DeepSpeed's `.deepspeed_env` file (name from DS_ENV_FILE) in $HOME and the working directory.
#pragma once

#include <string>
#include <vector>

#include "launcher/mpirun_command.h"

namespace ds::launcher {

// Names from `environment` ("NAME=value" entries, as in environ) to forward with `-x NAME`,
// sorted; the variables the launcher sets itself and Open MPI's own (OMPI_*, PMIX_*) are left out.
std::vector<std::string> names_to_forward(const std::vector<std::string>& environment);

// KEY=VALUE lines of a .deepspeed_env text; blank lines and `#` comments skipped, both sides
// stripped. Throws ds::Error naming `source` and the line when a line has no '='.
std::vector<EnvVar> parse_deepspeed_env(const std::string& text, const std::string& source);

// Reads <dir>/<DS_ENV_FILE or .deepspeed_env> for dir in `dirs` (missing files are skipped).
std::vector<EnvVar> read_deepspeed_env(const std::vector<std::string>& dirs);

}  // namespace ds::launcher
