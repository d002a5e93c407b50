// The stop-signal record (see stop_signal.h). The handler only touches a sig_atomic_t and calls
// async-signal-safe functions (write, signal, raise).
#include "util/stop_signal.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <mutex>

namespace ds {
namespace {

volatile std::sig_atomic_t g_received = 0;
bool g_installed = false;
struct sigaction g_old_term {}, g_old_int {};
std::mutex g_mu;  // install/uninstall only; never taken in the handler

void write_stderr(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void on_stop_signal(int sig) {
  if (g_received != 0) {
    // The second one: the user means it. Die of this signal, as with no handler (128+sig).
    write_stderr(sig == SIGTERM ? "\nsecond SIGTERM: exiting now, nothing saved\n" : "\nsecond SIGINT: exiting now, nothing saved\n");
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_received = sig;
  write_stderr(sig == SIGTERM ? "\nSIGTERM received: stopping at the next step boundary (send it again to exit at once)\n"
                     : "\nSIGINT received: stopping at the next step boundary (press Ctrl-C again to exit at once)\n");
}

}  // namespace

void install_stop_signal_handlers() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_installed) return;
  struct sigaction act {};
  act.sa_handler = on_stop_signal;
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, SIGTERM);  // one handler at a time: the "first" record cannot race
  sigaddset(&act.sa_mask, SIGINT);
  act.sa_flags = SA_RESTART;  // a stop request must not fail a read or an MPI call with EINTR
  sigaction(SIGTERM, &act, &g_old_term);
  sigaction(SIGINT, &act, &g_old_int);
  g_received = 0;
  g_installed = true;
}

void uninstall_stop_signal_handlers() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_installed) return;
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGINT, &g_old_int, nullptr);
  g_received = 0;
  g_installed = false;
}

int stop_signal_received() { return g_received; }

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "a stop request";
  }
}

}  // namespace ds
