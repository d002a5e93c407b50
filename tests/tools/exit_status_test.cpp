// Exit codes: the worst-code rule, the rank records the wrapper writes, and run_child's report of
// how a child ended (exit code, signal, program not found).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "launcher/child_process.h"
#include "launcher/exit_status.h"
#include "launcher/rank_shim.h"
#include "util/error.h"

namespace ds::launcher {
namespace {

TEST(LauncherWorstExitCode, Rules) {
  EXPECT_EQ(worst_exit_code({}, 0), 0);
  EXPECT_EQ(worst_exit_code({{0, false, 0}, {1, false, 0}}, 0), 0);
  // mpirun reports the lowest failing rank (5); the worst is 7
  EXPECT_EQ(worst_exit_code({{0, false, 5}, {1, false, 7}}, 5), 7);
  // ranks mpirun killed after rank 1 failed do not outrank it
  EXPECT_EQ(worst_exit_code({{0, true, 15}, {1, false, 3}}, 3), 3);
  // no record (remote ranks): mpirun's code
  EXPECT_EQ(worst_exit_code({}, 3), 3);
  EXPECT_EQ(worst_exit_code({{0, false, 0}}, 139), 139);
  // only a signal death recorded and mpirun said 0 (cannot happen with Open MPI, but be safe)
  EXPECT_EQ(worst_exit_code({{0, true, 9}}, 0), 137);
  EXPECT_EQ(describe_rank_exits({{0, true, 15}, {1, false, 3}, {2, false, 0}}),
            "rank 0 killed by signal 15; rank 1 exited with 3");
}

TEST(LauncherRankExits, WriteThenRead) {
  const auto dir = std::filesystem::temp_directory_path() / ("ds_rank_exits_" + std::to_string(getpid())) / "sub";
  EXPECT_TRUE(read_rank_exits(dir.string()).empty());
  ASSERT_TRUE(write_rank_exit(dir.string(), {10, false, 3}));
  ASSERT_TRUE(write_rank_exit(dir.string(), {2, true, 15}));
  EXPECT_EQ(read_rank_exits(dir.string()), (std::vector<RankExit>{{2, true, 15}, {10, false, 3}}));
  std::filesystem::remove_all(dir.parent_path());
}

TEST(LauncherRankShim, Args) {
  const auto o = parse_rank_shim_args({"--status_dir", "/s", "--rank_log", "/l/x_", "--", "./p", "--a", "--"});
  EXPECT_EQ(o.status_dir, "/s");
  EXPECT_EQ(o.rank_log_prefix, "/l/x_");
  EXPECT_EQ(o.program, (std::vector<std::string>{"./p", "--a", "--"}));
  EXPECT_THROW(parse_rank_shim_args({"--status_dir", "/s"}), Error);
  EXPECT_THROW(parse_rank_shim_args({"--bogus", "1", "--", "p"}), Error);
}

TEST(LauncherRunChild, ExitCodesSignalsAndMissingPrograms) {
  EXPECT_EQ(run_child({"sh", "-c", "exit 3"}, {}, SignalForwarding::kAll).shell_code(), 3);
  const ChildExit killed = run_child({"sh", "-c", "kill -TERM $$"}, {}, SignalForwarding::kAll);
  EXPECT_TRUE(killed.signaled);
  EXPECT_EQ(killed.shell_code(), 143);
  EXPECT_EQ(run_child({"/nonexistent/program"}, {}, SignalForwarding::kSentToUsOnly).shell_code(), 127);
  EXPECT_EQ(run_child({"sh", "-c", "test \"$DS_X\" = 'a b'"}, {{"DS_X", "a b"}}, SignalForwarding::kAll).code, 0);
}

TEST(LauncherRunChild, ForwardsASignalSentToUs) {
  // The child waits for SIGTERM; we send SIGTERM to ourselves from a helper process, run_child
  // forwards it, the child dies of it and we survive.
  const pid_t self = getpid();
  const pid_t helper = fork();
  if (helper == 0) {
    usleep(300 * 1000);
    kill(self, SIGTERM);
    _exit(0);
  }
  const ChildExit end = run_child({"sleep", "30"}, {}, SignalForwarding::kSentToUsOnly);
  int status = 0;
  waitpid(helper, &status, 0);
  EXPECT_TRUE(end.signaled);
  EXPECT_EQ(end.code, SIGTERM);
}

}  // namespace
}  // namespace ds::launcher
