// ds-run: DeepSpeed's `deepspeed` launcher over Open MPI's mpirun (docs/launcher.md).
//   ds-run [launcher options] <program> [program args...]
// Reads a DeepSpeed hostfile (or runs on localhost), applies --include/--exclude/--num_nodes/
// --num_gpus as DeepSpeed does, builds one mpirun command (tools/launcher/), runs it with signals
// forwarded, and exits with the worst rank's exit code; with --elastic_training it restarts the job
// on the hosts alive, as the config's elasticity section allows (launcher/elastic_run.h).
// `ds-run --rank_shim ...` is the per-rank wrapper mpirun starts (rank_shim.h); users never type it.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "launcher/child_process.h"
#include "launcher/elastic_run.h"
#include "launcher/exit_status.h"
#include "launcher/launch_plan.h"
#include "launcher/local_machine.h"
#include "launcher/rank_shim.h"
#include "util/error.h"
#include "util/blas_core_select.h"

namespace {

using namespace ds::launcher;

int fail(const std::string& message) {
  std::fprintf(stderr, "ds-run: error: %s\n", message.c_str());
  return 1;
}

// Every remote host must resolve before anything starts: mpirun would otherwise start the hosts it
// can reach and then fail on the first one it cannot, with Open MPI's less direct message.
void check_hosts_resolve(const LaunchPlan& plan, const MachineFacts& machine, const std::string& hostfile) {
  for (const HostSlots& h : plan.active) {
    if (is_local_host(h.host, machine.local_names)) continue;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(h.host.c_str(), nullptr, &hints, &found);
    if (found != nullptr) freeaddrinfo(found);
    if (rc != 0)
      throw ds::Error("host '" + h.host + "' in " + hostfile + " does not resolve (" + gai_strerror(rc) +
                      "): fix its name in the hostfile, or add it to DNS or /etc/hosts");
  }
}

// Runs the planned mpirun; returns ds-run's exit code and the stop signal it was sent, if any.
LaunchOutcome launch(LaunchPlan& plan) {
  std::string status_dir = plan.mpirun.status_dir;
  if (!status_dir.empty()) {
    std::vector<char> tmpl(status_dir.begin(), status_dir.end());
    tmpl.push_back('\0');
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "ds-run: warning: cannot create %s; exit code is mpirun's\n", status_dir.c_str());
      status_dir.clear();
    } else {
      status_dir = tmpl.data();
    }
    plan.mpirun.status_dir = status_dir;
  }
  const MpirunCommand cmd = build_mpirun_command(plan.mpirun);
  if (std::getenv("DS_RUN_VERBOSE") != nullptr) std::fprintf(stderr, "ds-run: %s\n", format_command(cmd).c_str());
  // Alive until the records are read and removed, so a signal cannot leave the status dir behind.
  SignalForwarder forwarder(SignalForwarding::kSentToUsOnly);
  // With the rank wrappers in place, a scheduler's SIGTERM reaches the programs at once and mpirun
  // does not kill them a second later (child_process.h), so a trainer can save and exit 0.
  if (!plan.mpirun.shim.empty()) forwarder.send_first_stop_as_graceful();
  const ChildExit end = run_child(cmd.argv, cmd.env, SignalForwarding::kSentToUsOnly);
  const int mpirun_code = end.shell_code();
  std::vector<RankExit> ranks;
  if (!status_dir.empty()) {
    ranks = read_rank_exits(status_dir);
    std::error_code ec;
    std::filesystem::remove_all(status_dir, ec);
  }
  int code = worst_exit_code(ranks, mpirun_code);
  if (code != 0 && forwarder.last_terminating_signal() != 0) code = 128 + forwarder.last_terminating_signal();
  if (code != 0) {
    const std::string detail = describe_rank_exits(ranks);
    std::fprintf(stderr, "ds-run: exit code %d (%s%smpirun returned %d)\n", code, detail.c_str(),
                 detail.empty() ? "" : "; ", mpirun_code);
  }
  return {code, forwarder.last_terminating_signal()};
}

// `ds-run --autotuning tune|run <launcher options> <program>...` is `ds-autotune [--run] -- <launcher
// options> <program>...`: DeepSpeed's spelling, our tool (it runs each experiment through ds-run).
int exec_autotuner(int argc, char** argv, size_t program_args, bool run_after) {
  std::vector<std::string> args{sibling_tool("ds-autotune")};
  if (run_after) args.push_back("--run");
  args.push_back("--");
  const int launcher_end = argc - int(program_args);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i < launcher_end && a == "--autotuning") {
      ++i;  // and its value
      continue;
    }
    if (i < launcher_end && a.rfind("--autotuning=", 0) == 0) continue;
    args.push_back(a);
  }
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  return fail("--autotuning: cannot run " + args[0] + " (build or install ds-autotune next to ds-run)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--rank_shim") {
    try {
      return run_rank_shim(parse_rank_shim_args(std::vector<std::string>(argv + 2, argv + argc)));
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }

  LaunchRequest r;
  ElasticOptions elastic;
  bool dry_run = false, no_local_rank = false, no_python = false, elastic_training = false;
  std::string autotuning;
  CLI::App app{"ds-run [launcher options] <program> [program args...]\nLaunch a program on the hosts of a DeepSpeed hostfile through Open MPI's mpirun"};
  app.add_option("-H,--hostfile", r.hostfile, "DeepSpeed hostfile ('worker-0 slots=4' lines)")
      ->capture_default_str();
  app.add_option("-i,--include", r.include, "resources to use: NODE_SPEC[@NODE_SPEC...], NODE_SPEC=NAME[:SLOT[,SLOT...]]");
  app.add_option("-e,--exclude", r.exclude, "resources not to use (same format; exclusive with --include)");
  app.add_option("--num_nodes", r.num_nodes, "use the first N hosts of the hostfile")
      ->check(ds::tools::whole_number(1, 1 << 20));
  app.add_option("--num_gpus,--num_accelerators,--num_procs", r.num_gpus,
                 "ranks per host (slots 0..N-1); without a hostfile, ranks on localhost (default: one per NUMA node)")
      ->check(ds::tools::whole_number(1, 1 << 16));
  app.add_option("--master_addr", r.master_addr, "exported as MASTER_ADDR (default 127.0.0.1 on one machine, else the first host)");
  app.add_option("--master_port", r.master_port, "exported as MASTER_PORT")->capture_default_str()
      ->check(ds::tools::whole_number(1, 65535));
  app.add_option("--launcher", r.launcher, "multi-node backend: openmpi only")->capture_default_str();
  app.add_option("--launcher_args", r.launcher_args, "extra mpirun arguments, as one quoted string");
  app.add_option("--mpirun", r.mpirun, "the mpirun to run")->capture_default_str();
  app.add_flag("--bind_cores_to_rank", r.bind_cores_to_rank, "bind each local rank to its share of the cores (DS_BIND_CORES_TO_RANK=1)");
  app.add_option("--enable_each_rank_log", r.each_rank_log, "write each rank's stdout and stderr to DIR/<timestamp>_rank<r>.log");
  CLI::Option* elastic_flag = app.add_flag("--elastic_training,--elastic", elastic_training,
      "restart on the hosts alive after a failure, and on more when hosts return, with the batch the config's "
      "elasticity section gives (docs/elasticity.md)");
  app.add_option("--min_elastic_nodes", elastic.min_nodes, "elastic: the fewest hosts to run on (default: any)")
      ->needs(elastic_flag);
  app.add_option("--max_elastic_nodes", elastic.max_nodes, "elastic: the most hosts to run on (default: all)")
      ->needs(elastic_flag);
  app.add_option("--max_restarts", elastic.max_restarts, "elastic: restarts after failures before giving up")
      ->capture_default_str()->check(ds::tools::whole_number(0, 1 << 20))->needs(elastic_flag);
  app.add_option("--elastic_probe_interval", elastic.probe_interval_s,
                 "elastic: seconds between probes of the hosts outside the job")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0))->needs(elastic_flag);
  app.add_option("--elastic_config", elastic.config_path,
                 "elastic: the DeepSpeed config (default: the program's --deepspeed_config/--ds_config/--config)")
      ->needs(elastic_flag);
  app.add_option("--autotuning", autotuning,
                 "tune: find the fastest config with ds-autotune (the config's autotuning section); run: then train "
                 "with it (docs/autotuning.md)")
      ->check(CLI::IsMember({"tune", "run"}));
  app.add_flag("--dry-run,--dry_run", dry_run, "print the mpirun command line and exit");
  app.add_flag("--no_local_rank", no_local_rank, "accepted for DeepSpeed compatibility (ds-run never adds --local_rank)");
  app.add_flag("--no_python", no_python, "accepted for DeepSpeed compatibility (programs always run directly)");
  app.prefix_command();  // the first positional word starts the program's own command line
  CLI11_PARSE(app, argc, argv);
  r.hostfile_given = app.count("--hostfile") > 0;
  r.program = app.remaining();
  if (!r.program.empty() && r.program.front() == "--") r.program.erase(r.program.begin());
  if (!autotuning.empty()) return exec_autotuner(argc, argv, r.program.size(), autotuning == "run");

  try {
    const MachineFacts machine = detect_machine_facts();
    LaunchPlan plan = plan_launch(r, machine);
    for (const std::string& w : plan.warnings) std::fprintf(stderr, "ds-run: warning: %s\n", w.c_str());
    if (dry_run) {
      std::printf("%s\n", format_command(build_mpirun_command(plan.mpirun)).c_str());
      return 0;
    }
    // After the plan: a value chosen here reaches the local ranks (they inherit mpirun's environment)
    // but is not forwarded with -x to other hosts, whose CPUs may differ; a user's value is.
    check_hosts_resolve(plan, machine, r.hostfile);
    ds::export_blas_core_for_ranks("ds-run");
    if (elastic_training) {
      if (elastic.config_path.empty()) elastic.config_path = find_config_argument(r.program);
      return run_elastic(r, machine, elastic, launch);
    }
    return launch(plan).code;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
