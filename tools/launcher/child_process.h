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

struct ChildExit {
  bool signaled = false;  // killed by signal `code`, else exited with `code`
  int code = 0;
  // The shell convention: exit code, or 128 + signal.
  int shell_code() const { return signaled ? 128 + code : code; }
};

// While alive, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 go to the running child (and
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
};

// Runs argv (PATH lookup for argv[0]) with `extra_env` added to our environment and waits for it,
// forwarding signals as `forwarding` says (through the caller's SignalForwarder when one is alive,
// else one of its own for the call). Throws ds::Error if it cannot start; a program that is not
// found exits 127 with a message, as a shell does.
ChildExit run_child(const std::vector<std::string>& argv, const std::vector<EnvVar>& extra_env,
                    SignalForwarding forwarding);

}  // namespace ds::launcher
