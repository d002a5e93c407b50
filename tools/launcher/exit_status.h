// Each rank's exit status and the launch's "worst" exit code.
//
// What mpirun gives (Open MPI 4.1.4, measured): 0 when every rank exits 0; otherwise the exit code
// of the FIRST rank it saw exit non-zero (its man page says the lowest rank, but rank 1 exiting 7
// a moment before rank 0 exits 5 gives 7), or 128+signal when that rank was killed (SIGSEGV → 139).
// On that first failure it sends SIGTERM to the other ranks; if mpirun itself is signalled it
// returns 1.
// What ds-run adds: the per-rank wrapper (rank_shim.h) writes `<status_dir>/rank.<r>` as it exits,
// and ds-run reports the worst of them: the largest non-zero code a rank exited with on its own;
// failing that mpirun's code; failing that a rank's death by signal (128+signal). Ranks that
// mpirun killed after another failed die by signal, so they never outrank the rank that failed;
// a rank that catches the SIGTERM and exits with a worse code (a trainer saving a checkpoint) does.
#pragma once

#include <string>
#include <vector>

namespace ds::launcher {

struct RankExit {
  int rank = 0;
  bool signaled = false;  // killed by a signal (`code` is the signal number) or exited (`code`)
  int code = 0;
  bool operator==(const RankExit&) const = default;
};

// Writes `<dir>/rank.<rank>` ("exit 3" or "signal 15"); creates `dir` if needed. Best effort:
// returns false instead of throwing, since the rank's own exit code still reaches mpirun.
bool write_rank_exit(const std::string& dir, const RankExit& exit);

// Reads every rank.<r> file of `dir` (none when it does not exist), sorted by rank.
std::vector<RankExit> read_rank_exits(const std::string& dir);

// The code ds-run exits with (rules above).
int worst_exit_code(const std::vector<RankExit>& ranks, int mpirun_code);

// A one-line account for stderr when the launch failed: "rank 1 exited with 3; rank 0: signal 15".
std::string describe_rank_exits(const std::vector<RankExit>& ranks);

}  // namespace ds::launcher
