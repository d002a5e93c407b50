// Launch planning (see launch_plan.h).
#include "launcher/launch_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>

#include "launcher/launch_env.h"
#include "launcher/local_machine.h"
#include "launcher/resource_filter.h"
#include "util/error.h"

extern char** environ;

namespace ds::launcher {

MachineFacts detect_machine_facts() {
  MachineFacts m;
  m.cores = usable_cores();
  m.numa_nodes = numa_nodes();
  m.local_names = local_host_names();
  m.root = running_as_root();
  m.self_exe = self_executable();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) m.environment.emplace_back(*e);
  const char* home = std::getenv("HOME");
  std::vector<std::string> dirs;
  if (home != nullptr) dirs.emplace_back(home);
  dirs.emplace_back(".");
  m.deepspeed_env = read_deepspeed_env(dirs);
  char stamp[32] = {};
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", &local);
  m.timestamp = stamp;
  const char* tmp = std::getenv("TMPDIR");
  m.status_dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ds-run.XXXXXX";
  return m;
}

LaunchPlan plan_launch(const LaunchRequest& r, const MachineFacts& m) {
  std::string launcher = r.launcher;
  std::transform(launcher.begin(), launcher.end(), launcher.begin(), [](unsigned char c) { return std::tolower(c); });
  DS_CHECK(launcher == "openmpi", NotSupported,
           "--launcher " + r.launcher + ": ds-run starts ranks through Open MPI's mpirun only (--launcher openmpi); "
           "DeepSpeed's pdsh, slurm, mpich, impi and mvapich runners are not implemented");
  DS_CHECK(!r.program.empty(), Error, "no program to launch (usage: ds-run [options] <program> [args...])");
  DS_CHECK(!((r.num_nodes >= 0 || r.num_gpus >= 0) && (!r.include.empty() || !r.exclude.empty())), Error,
           "Cannot specify num_nodes/gpus with include/exclude (--include/--exclude already choose the slots)");
  DS_CHECK(r.num_nodes != 0 && r.num_gpus != 0, Error, "--num_nodes and --num_gpus/--num_procs must be at least 1");

  LaunchPlan plan;
  std::optional<ResourcePool> pool = read_hostfile(r.hostfile);
  const bool multi_node = pool.has_value();
  if (!multi_node) {
    DS_CHECK(!r.hostfile_given, Error,
             "hostfile " + r.hostfile + " does not exist (fix the path, or leave out -H/--hostfile to run on localhost)");
    // DeepSpeed uses every local GPU; on CPU the unit is a NUMA node (one rank per socket is the
    // usual advice for CPU training, and the engine gives each local rank its share of the cores).
    pool = ResourcePool{{"localhost", r.num_gpus > 0 ? r.num_gpus : m.numa_nodes}};
    DS_CHECK(r.num_nodes <= 1, Error, "Num nodes is >1 but no extra nodes available via hostfile (no " + r.hostfile +
                                          "; pass -H/--hostfile with one line per node)");
  }
  ActiveResources active = parse_inclusion_exclusion(*pool, r.include, r.exclude);
  if (r.num_nodes > static_cast<int>(active.size()))
    plan.warnings.push_back("--num_nodes " + std::to_string(r.num_nodes) + " but the hostfile has " +
                            std::to_string(active.size()) + " hosts: using all of them");
  active = limit_resources(std::move(active), r.num_nodes, r.num_gpus);
  std::erase_if(active, [](const HostSlots& h) { return h.slots.empty(); });
  DS_CHECK(!active.empty(), Error, "no slot left to run on after --include/--exclude");
  if (multi_node && r.num_gpus > 0)
    for (const HostEntry& e : *pool)
      if (r.num_gpus > e.slots &&
          std::any_of(active.begin(), active.end(), [&](const HostSlots& h) { return h.host == e.host; }))
        plan.warnings.push_back("--num_gpus " + std::to_string(r.num_gpus) + " starts more ranks on " + e.host +
                                " than its " + std::to_string(e.slots) + " slots (as DeepSpeed does)");

  const bool all_local = std::all_of(active.begin(), active.end(),
                                     [&](const HostSlots& h) { return is_local_host(h.host, m.local_names); });
  MpirunOptions& o = plan.mpirun;
  o.resources = active;
  o.program = r.program;
  // DeepSpeed asks the first host for its address over ssh (`hostname -I`); we do not ssh, and the
  // host's name as the hostfile spells it is what the other nodes already resolve.
  o.master_addr = !r.master_addr.empty() ? r.master_addr : all_local ? "127.0.0.1" : active.front().host;
  o.master_port = r.master_port;
  o.bind_cores_to_rank = r.bind_cores_to_rank;
  o.forward_names = names_to_forward(m.environment);
  o.forward_values = m.deepspeed_env;
  o.launcher_args = split_launcher_args(r.launcher_args);
  o.mpirun = r.mpirun;
  o.as_root = m.root;
  o.local_cores = m.cores;
  o.local_names = m.local_names;
  if (!r.each_rank_log.empty()) {
    std::error_code ec;
    DS_CHECK(!std::filesystem::is_regular_file(r.each_rank_log, ec), Error,
             "--enable_each_rank_log " + r.each_rank_log + " should not be a file, it should be a directory.");
    std::string dir = std::filesystem::absolute(r.each_rank_log, ec).lexically_normal().string();
    if (dir.empty()) dir = r.each_rank_log;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    o.rank_log_prefix = dir + "/" + m.timestamp + "_";
  }
  // Every rank runs under the wrapper, on every host: it turns ds-run's graceful stop into SIGTERM
  // for the program (preemption saves on every host) and writes per-rank logs. It needs ds-run at
  // the same path on every host, as DeepSpeed's launcher needs deepspeed on each node. Its exit
  // records are read from this machine's disk, so only when every rank is local.
  o.shim = m.self_exe;
  if (all_local) o.status_dir = m.status_dir;
  plan.active = std::move(active);
  return plan;
}

}  // namespace ds::launcher
