// `ds-run --dry-run` text: for a set of hostfiles and include/exclude strings, the exact mpirun
// command line ds-run prints and runs (plan_launch + build_mpirun_command + format_command, the
// same calls ds_run.cpp makes), on a fixed machine so the lines do not depend on where tests run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/launch_plan.h"
#include "util/error.h"

namespace ds::launcher {
namespace {

// A 2-core, 1-NUMA-node machine called node-a, not root, with nothing to forward.
MachineFacts machine() {
  MachineFacts m;
  m.cores = 2;
  m.numa_nodes = 1;
  m.local_names = {"localhost", "127.0.0.1", "node-a"};
  m.self_exe = "/opt/ds/bin/ds-run";
  m.timestamp = "20240102030405";
  m.status_dir = "/tmp/ds-run.XXXXXX";
  return m;
}

class LauncherDryRun : public ::testing::Test {
 protected:
  std::string hostfile(const std::string& text) {
    const auto path = dir_ / ("hostfile" + std::to_string(count_++));
    std::ofstream(path) << text;
    return path.string();
  }
  static std::string line(LaunchRequest r, const MachineFacts& m = machine()) {
    if (r.program.empty()) r.program = {"./train", "--config", "ds config.json"};
    return format_command(build_mpirun_command(plan_launch(r, m).mpirun));
  }
  static std::string error_of(const LaunchRequest& r) {
    try {
      line(r);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("ds_dry_run_" + std::to_string(getpid()));
  int count_ = 0;
};

LaunchRequest with_hostfile(const std::string& path) {
  LaunchRequest r;
  r.hostfile = path;
  r.hostfile_given = true;
  return r;
}

const char* kTail = " -x MASTER_PORT=29500 /opt/ds/bin/ds-run --rank_shim -- ./train --config 'ds config.json'";
// Remote hosts: a silent one is noticed in about 15 s (mpirun_command.cpp).
#define KEEPALIVE "--mca oob_tcp_keepalive_time 3 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 5 "

TEST_F(LauncherDryRun, NoHostfileRunsOneRankPerNumaNodeOnLocalhost) {
  LaunchRequest r;
  r.hostfile = (dir_ / "absent").string();
  EXPECT_EQ(line(r),
            "mpirun --bind-to none -np 1 -H localhost:1 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 "
            "/opt/ds/bin/ds-run --rank_shim --status_dir /tmp/ds-run.XXXXXX -- ./train --config 'ds config.json'");
}

TEST_F(LauncherDryRun, NumProcsOnLocalhostOversubscribesPastTheCores) {
  LaunchRequest r;
  r.hostfile = (dir_ / "absent").string();
  r.num_gpus = 2;
  EXPECT_EQ(line(r), "mpirun --bind-to none -np 2 -H localhost:2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 "
                     "/opt/ds/bin/ds-run --rank_shim --status_dir /tmp/ds-run.XXXXXX -- ./train --config 'ds config.json'");
  r.num_gpus = 4;
  MachineFacts root = machine();
  root.root = true;
  EXPECT_EQ(line(r, root),
            "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --bind-to none --oversubscribe -np 4 "
            "-H localhost:4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 "
            "/opt/ds/bin/ds-run --rank_shim --status_dir /tmp/ds-run.XXXXXX -- ./train --config 'ds config.json'");
}

TEST_F(LauncherDryRun, TwoWorkersAllSlots) {
  const auto r = with_hostfile(hostfile("worker-0 slots=4\nworker-1 slots=4\n"));
  EXPECT_EQ(line(r), std::string("mpirun --bind-to none " KEEPALIVE "-np 8 -H worker-0:4,worker-1:4 -x MASTER_ADDR=worker-0") + kTail);
}

TEST_F(LauncherDryRun, IncludeWholeHostAndChosenSlots) {
  auto r = with_hostfile(hostfile("worker-0 slots=4\nworker-1 slots=4\n"));
  r.include = "worker-0@worker-1:0,2";
  EXPECT_EQ(line(r), "mpirun --bind-to none " KEEPALIVE
                     "-np 4 -H worker-0:4 -x MASTER_ADDR=worker-0 -x MASTER_PORT=29500 -x CUDA_VISIBLE_DEVICES=0,1,2,3 "
                     "/opt/ds/bin/ds-run --rank_shim -- ./train --config 'ds config.json' : "
                     "-np 2 -H worker-1:2 -x MASTER_ADDR=worker-0 -x MASTER_PORT=29500 -x CUDA_VISIBLE_DEVICES=0,2 "
                     "/opt/ds/bin/ds-run --rank_shim -- ./train --config 'ds config.json'");
}

TEST_F(LauncherDryRun, ExcludeAHostAndSlots) {
  auto r = with_hostfile(hostfile("# cluster\nworker-0 slots=4\n\nworker-1 slots=4\nworker-2 slots=2\n"));
  r.exclude = "worker-0";
  EXPECT_EQ(line(r),
            std::string("mpirun --bind-to none " KEEPALIVE "-np 6 -H worker-1:4,worker-2:2 -x MASTER_ADDR=worker-1") + kTail);
  r.exclude = "worker-1:3@worker-2:0";
  EXPECT_EQ(line(r), "mpirun --bind-to none " KEEPALIVE
                     "-np 4 -H worker-0:4 -x MASTER_ADDR=worker-0 -x MASTER_PORT=29500 -x CUDA_VISIBLE_DEVICES=0,1,2,3 "
                     "/opt/ds/bin/ds-run --rank_shim -- ./train --config 'ds config.json' : "
                     "-np 3 -H worker-1:3 -x MASTER_ADDR=worker-0 -x MASTER_PORT=29500 -x CUDA_VISIBLE_DEVICES=0,1,2 "
                     "/opt/ds/bin/ds-run --rank_shim -- ./train --config 'ds config.json' : "
                     "-np 1 -H worker-2:1 -x MASTER_ADDR=worker-0 -x MASTER_PORT=29500 -x CUDA_VISIBLE_DEVICES=1 "
                     "/opt/ds/bin/ds-run --rank_shim -- ./train --config 'ds config.json'");
}

TEST_F(LauncherDryRun, NumNodesAndNumGpus) {
  auto r = with_hostfile(hostfile("worker-0 slots=4\nworker-1 slots=4\n"));
  r.num_nodes = 1;
  r.num_gpus = 2;
  EXPECT_EQ(line(r), std::string("mpirun --bind-to none " KEEPALIVE "-np 2 -H worker-0:2 -x MASTER_ADDR=worker-0") + kTail);
}

TEST_F(LauncherDryRun, LocalHostfileUsesTheWrapperAndEveryOption) {
  auto r = with_hostfile(hostfile("node-a slots=2\n"));
  r.master_addr = "10.0.0.1";
  r.master_port = 29600;
  r.bind_cores_to_rank = true;
  r.each_rank_log = "/var/log/ds/";
  r.launcher_args = "--mca btl self,tcp --report-bindings";
  MachineFacts m = machine();
  m.environment = {"PATH=/usr/bin", "HOME=/root", "OMP_NUM_THREADS=4", "NCCL_DEBUG=INFO", "OMPI_COMM_WORLD_RANK=0",
                   "DS_BIND_CORES_TO_RANK=1", "DS_COMM_TIMEOUT_S=60"};
  m.deepspeed_env = {{"WANDB_MODE", "offline"}};
  EXPECT_EQ(line(r, m),
            "mpirun --bind-to none --mca btl self,tcp --report-bindings -np 2 -H node-a:2 -x MASTER_ADDR=10.0.0.1 "
            "-x MASTER_PORT=29600 -x DS_BIND_CORES_TO_RANK=1 -x DS_COMM_TIMEOUT_S -x NCCL_DEBUG -x OMP_NUM_THREADS "
            "-x PATH -x WANDB_MODE=offline /opt/ds/bin/ds-run --rank_shim --status_dir /tmp/ds-run.XXXXXX "
            "--rank_log /var/log/ds/20240102030405_ -- ./train --config 'ds config.json'");
}

TEST_F(LauncherDryRun, RemoteHostsWithPerRankLogsStillUseTheWrapper) {
  auto r = with_hostfile(hostfile("worker-0 slots=1\n"));
  r.each_rank_log = "/shared/logs";
  EXPECT_EQ(line(r), "mpirun --bind-to none " KEEPALIVE "-np 1 -H worker-0:1 -x MASTER_ADDR=worker-0 -x MASTER_PORT=29500 "
                     "/opt/ds/bin/ds-run --rank_shim --rank_log /shared/logs/20240102030405_ -- "
                     "./train --config 'ds config.json'");
}

TEST_F(LauncherDryRun, KeepaliveOnlyAcrossHostsAndNotOverTheUsers) {
  auto r = with_hostfile(hostfile("worker-0 slots=1\n"));
  r.launcher_args = "--mca oob_tcp_keepalive_time 60";
  EXPECT_EQ(line(r), std::string("mpirun --bind-to none --mca oob_tcp_keepalive_time 60 -np 1 -H worker-0:1 "
                                 "-x MASTER_ADDR=worker-0") + kTail);
}

TEST_F(LauncherDryRun, Errors) {
  const std::string hf = hostfile("worker-0 slots=4\nworker-1 slots=4\n");
  auto r = with_hostfile(hf);
  r.include = "worker-0";
  r.num_gpus = 1;
  EXPECT_NE(error_of(r).find("Cannot specify num_nodes/gpus with include/exclude"), std::string::npos);
  r = with_hostfile(hf);
  r.exclude = "worker-0";
  r.num_nodes = 1;
  EXPECT_NE(error_of(r).find("Cannot specify num_nodes/gpus with include/exclude"), std::string::npos);
  r = with_hostfile(hf);
  r.include = "worker-2";
  EXPECT_NE(error_of(r).find("Hostname 'worker-2' not found in hostfile"), std::string::npos);
  r = with_hostfile(hf);
  r.exclude = "worker-0@worker-1";
  EXPECT_NE(error_of(r).find("no slot left"), std::string::npos);
  r = with_hostfile((dir_ / "absent").string());
  EXPECT_NE(error_of(r).find("does not exist"), std::string::npos);
  r = LaunchRequest{};
  r.hostfile = (dir_ / "absent").string();
  r.num_nodes = 2;
  EXPECT_NE(error_of(r).find("Num nodes is >1 but no extra nodes available via hostfile"), std::string::npos);
  r.num_nodes = -1;
  r.launcher = "pdsh";
  EXPECT_NE(error_of(r).find("Open MPI's mpirun only"), std::string::npos);
  r = with_hostfile(hostfile("worker-0 slots=2\nworker-0 slots=2\n"));
  EXPECT_NE(error_of(r).find(":2: Hostfile contains multiple entries for worker-0"), std::string::npos);
}

TEST(LauncherShellQuote, QuotesOnlyWhatAShellWouldSplit) {
  EXPECT_EQ(shell_quote("worker-0:4,worker-1:2"), "worker-0:4,worker-1:2");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(split_launcher_args("  -mca plm_rsh_args \"-p 2222\" 'x y'"),
            (std::vector<std::string>{"-mca", "plm_rsh_args", "-p 2222", "x y"}));
}

}  // namespace
}  // namespace ds::launcher
