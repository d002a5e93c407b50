// fork/exec, signal forwarding and wait (see child_process.h).
#include "launcher/child_process.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace ds::launcher {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// A signal handler can reach only globals; one child runs at a time per process.
volatile sig_atomic_t g_child_pid = 0;
volatile sig_atomic_t g_forward_all = 0;

void forward(int sig, siginfo_t* info, void*) {
  if (g_child_pid <= 0) return;
  // si_code <= 0 (SI_USER, SI_QUEUE, SI_TKILL): sent by a process; > 0: by the kernel (a tty).
  if (g_forward_all != 0 || info == nullptr || info->si_code <= 0) kill(g_child_pid, sig);
}

}  // namespace

ChildExit run_child(const std::vector<std::string>& argv, const std::vector<EnvVar>& extra_env,
                    SignalForwarding forwarding) {
  DS_CHECK(!argv.empty(), Error, "run_child: empty command");
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  // Install the handlers before fork so a signal arriving right after it is not lost to SIG_DFL.
  struct sigaction act {}, old[std::size(kForwarded)];
  act.sa_sigaction = forward;
  act.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&act.sa_mask);
  g_forward_all = forwarding == SignalForwarding::kAll ? 1 : 0;
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &act, &old[i]);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid == 0) {
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
    if (forwarding == SignalForwarding::kAll) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(128 + SIGKILL);  // the wrapper died before prctl took effect
    }
    for (const auto& [name, value] : extra_env) setenv(name.c_str(), value.c_str(), 1);
    execvp(cargv[0], cargv.data());
    const int err = errno;
    std::fprintf(stderr, "ds-run: cannot run '%s': %s\n", cargv[0], std::strerror(err));
    _exit(err == ENOENT ? 127 : 126);
  }
  if (pid < 0) {
    const int err = errno;
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
    throw Error(std::string("cannot start '") + argv[0] + "': " + std::strerror(err));
  }
  g_child_pid = pid;

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child_pid = 0;
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &old[i], nullptr);
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WEXITSTATUS(status)};
}

}  // namespace ds::launcher
