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
#include <optional>

#include "util/error.h"

namespace ds::launcher {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};
static_assert(kGracefulStopSignal == SIGALRM);

// A signal handler can reach only globals; one forwarder and one child at a time per process.
volatile sig_atomic_t g_child_pid = 0;
volatile sig_atomic_t g_forward_all = 0;
volatile sig_atomic_t g_last_terminating = 0;
volatile sig_atomic_t g_graceful_first_stop = 0;  // ds-run: the first SIGTERM/SIGINT goes as SIGALRM
volatile sig_atomic_t g_stops_forwarded = 0;
bool g_forwarder_alive = false;
struct sigaction g_old[std::size(kForwarded)];

void forward(int sig, siginfo_t* info, void*) {
  if (sig != SIGUSR1 && sig != SIGUSR2 && sig != SIGALRM) g_last_terminating = sig;
  if (g_child_pid <= 0) return;
  // The rank wrapper: mpirun's forwarded graceful stop becomes the SIGTERM the program handles.
  if (g_forward_all != 0 && sig == kGracefulStopSignal) sig = SIGTERM;
  // si_code <= 0 (SI_USER, SI_QUEUE, SI_TKILL): sent by a process; > 0: by the kernel (a tty).
  if (g_forward_all == 0 && info != nullptr && info->si_code > 0) return;
  if (g_graceful_first_stop != 0 && (sig == SIGTERM || sig == SIGINT)) {
    const sig_atomic_t forwarded = g_stops_forwarded;  // volatile: one read, one write
    g_stops_forwarded = forwarded + 1;
    if (forwarded == 0) sig = kGracefulStopSignal;
  }
  kill(g_child_pid, sig);
}

sigset_t forwarded_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  return set;
}

}  // namespace

SignalForwarder::SignalForwarder(SignalForwarding mode) {
  DS_CHECK(!g_forwarder_alive, Error, "internal: one SignalForwarder at a time");
  g_forwarder_alive = true;
  g_forward_all = mode == SignalForwarding::kAll ? 1 : 0;
  g_last_terminating = 0;
  g_graceful_first_stop = 0;
  g_stops_forwarded = 0;
  struct sigaction act {};
  act.sa_sigaction = forward;
  act.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&act.sa_mask);
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &act, &g_old[i]);
}

SignalForwarder::~SignalForwarder() {
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &g_old[i], nullptr);
  g_forwarder_alive = false;
}

int SignalForwarder::last_terminating_signal() const { return g_last_terminating; }

void SignalForwarder::send_first_stop_as_graceful() { g_graceful_first_stop = 1; }

bool stop_child_gracefully() {
  const pid_t pid = g_child_pid;
  return pid > 0 && kill(pid, kGracefulStopSignal) == 0;
}

ChildExit run_child(const std::vector<std::string>& argv, const std::vector<EnvVar>& extra_env,
                    SignalForwarding forwarding) {
  DS_CHECK(!argv.empty(), Error, "run_child: empty command");
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  std::optional<SignalForwarder> own;
  if (!g_forwarder_alive) own.emplace(forwarding);
  g_forward_all = forwarding == SignalForwarding::kAll ? 1 : 0;
  // Hold the forwarded signals across fork so one that arrives before the child's pid is known is
  // delivered (and forwarded) right after, instead of being dropped.
  const sigset_t set = forwarded_set();
  sigset_t old_mask;
  sigprocmask(SIG_BLOCK, &set, &old_mask);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid == 0) {
    for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &g_old[i], nullptr);
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
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
  const int fork_errno = errno;
  if (pid > 0) g_child_pid = pid;
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) throw Error(std::string("cannot start '") + argv[0] + "': " + std::strerror(fork_errno));

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child_pid = 0;
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WEXITSTATUS(status)};
}

}  // namespace ds::launcher
