// Is a host reachable now? Asked the way mpirun will reach it: through Open MPI's rsh agent (ssh,
// or the test hosts' agent), running `true` there within a time limit. ds-run --elastic_training
// probes the hostfile's hosts before each (re)start and while a job runs (docs/elasticity.md).
#pragma once

#include <string>
#include <vector>

namespace ds::launcher {

// The agent Open MPI starts remote daemons with: `--mca plm_rsh_agent X` in the launcher arguments,
// else OMPI_MCA_plm_rsh_agent in `environment` ("NAME=value" entries), else ssh. Open MPI's list
// form ("ssh : rsh") takes its first entry; plain ssh gets BatchMode and a connect timeout so that a
// probe never waits for a password or a dead host's TCP timeout.
std::vector<std::string> rsh_agent(const std::vector<std::string>& launcher_args,
                                   const std::vector<std::string>& environment);

// True when `host` is this machine (`local_names`) or `agent host true` exits 0 within
// `timeout_s` seconds (the probe is killed after that).
bool host_reachable(const std::string& host, const std::vector<std::string>& agent,
                    const std::vector<std::string>& local_names, double timeout_s);

}  // namespace ds::launcher
