// Starting one child (mpirun, or a rank's program), forwarding signals to it, and waiting for it.
// Both ds-run and its per-rank wrapper must stay alive until the child ends, pass on a scheduler's
// SIGTERM (or a user's SIGINT), and report how the child ended.
#pragma once

#include <string>
#include <vector>

#include "launcher/mpirun_command.h"

namespace ds::launcher {

enum class SignalForwarding {
  // The child shares our process group, so a terminal's Ctrl-C (si_code SI_KERNEL) already
  // reached it; forward only signals another process sent to us alone (kill <pid>). For mpirun,
  // whose second SIGINT means "abort without cleanup".
  kSentToUsOnly,
  // The child gets its own process group and dies with us (PR_SET_PDEATHSIG); forward every
  // signal exactly once. For the rank wrapper under mpirun.
  kAll,
};

// A graceful stop through mpirun. Open MPI answers a SIGTERM or SIGINT sent to mpirun by killing
// the job: SIGCONT to each rank, then odls_base_sigkill_timeout (1 s) later SIGTERM, then 1 s later
// SIGKILL (measured, 4.1.4) — too little for a trainer to save a checkpoint. It forwards SIGALRM to
// every rank unchanged, so ds-run sends the first SIGTERM/SIGINT it is sent as SIGALRM, and the
// rank wrapper turns SIGALRM into SIGTERM for its program. A second one is forwarded as itself.
inline constexpr int kGracefulStopSignal = 14;  // SIGALRM

struct ChildExit {
  bool signaled = false;  // killed by signal `code`, else exited with `code`
  int code = 0;
  // The shell convention: exit code, or 128 + signal.
  int shell_code() const { return signaled ? 128 + code : code; }
};

// While alive, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM go to the running child (and
// are dropped when none runs), so the caller also survives them while it records how the child
// ended. One at a time per process (a signal handler reaches only globals); restores on destruction.
class SignalForwarder {
 public:
  explicit SignalForwarder(SignalForwarding mode);
  ~SignalForwarder();
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;
  // The last SIGINT/SIGTERM/SIGHUP/SIGQUIT we received (0: none): a launch stopped by one exits
  // 128+signal, the shell's "killed by" code, rather than mpirun's bare 1.
  int last_terminating_signal() const;
  // ds-run with rank wrappers: the first SIGTERM/SIGINT another process sends us goes to the child
  // as kGracefulStopSignal. (The wrappers, in kAll mode, always turn that signal into SIGTERM.)
  void send_first_stop_as_graceful();
};

// Sends the running child the graceful stop (kGracefulStopSignal), as a first SIGTERM to ds-run
// would: every rank saves at its next step boundary and exits 0. Safe from any thread; false when
// no child runs. ds-run --elastic_training uses it to restart a job on more hosts.
bool stop_child_gracefully();

// Runs argv (PATH lookup for argv[0]) with `extra_env` added to our environment and waits for it,
// forwarding signals as `forwarding` says (through the caller's SignalForwarder when one is alive,
// else one of its own for the call). Throws ds::Error if it cannot start; a program that is not
// found exits 127 with a message, as a shell does.
ChildExit run_child(const std::vector<std::string>& argv, const std::vector<EnvVar>& extra_env,
                    SignalForwarding forwarding);

}  // namespace ds::launcher
