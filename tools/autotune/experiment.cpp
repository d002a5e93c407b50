#include "autotune/experiment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <fstream>
#include <thread>

#include "util/error.h"

namespace ds::autotune {
namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

}  // namespace

ExperimentCommand experiment_command(const std::string& ds_run, const std::vector<std::string>& args) {
  ExperimentCommand c;
  c.ds_run.push_back(ds_run);
  c.ds_run.insert(c.ds_run.end(), args.begin(), args.end());
  for (size_t i = 1; i < c.ds_run.size(); ++i)
    for (const std::string flag : {"--deepspeed_config", "--ds_config", "--config"}) {
      if (c.ds_run[i] == flag && i + 1 < c.ds_run.size()) {
        c.config_index = i + 1;
        return c;
      }
      if (c.ds_run[i].rfind(flag + "=", 0) == 0) {
        c.config_index = i;
        c.config_prefix = flag + "=";
        return c;
      }
    }
  throw Error("no DeepSpeed config in the program's arguments (--deepspeed_config, --ds_config or --config PATH): "
              "ds-autotune writes each experiment's config there");
}

std::vector<std::string> with_config(const ExperimentCommand& c, const std::string& config_path) {
  std::vector<std::string> argv = c.ds_run;
  argv[c.config_index] = c.config_prefix + config_path;
  return argv;
}

namespace {

// DeepSpeed's get_val_by_key: the first value of `key` in a depth-first walk of the config.
const nlohmann::json* find_key(const nlohmann::json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  if (auto it = j.find(key); it != j.end()) return &*it;
  for (const auto& [k, v] : j.items())
    if (const nlohmann::json* found = find_key(v, key)) return found;
  return nullptr;
}

}  // namespace

std::vector<std::string> with_arg_mappings(std::vector<std::string> argv,
                                           const std::map<std::string, std::string>& mappings,
                                           const nlohmann::json& config) {
  for (const auto& [key, arg] : mappings) {
    const nlohmann::json* v = find_key(config, key);
    if (v == nullptr || v->is_null() || v->is_structured()) continue;
    const std::string value = v->is_string() ? v->get<std::string>() : v->dump();
    if (value == "auto") continue;
    auto at = std::find(argv.begin() + 1, argv.end(), arg);
    if (at != argv.end() && at + 1 != argv.end()) {
      *(at + 1) = value;
    } else {
      argv.push_back(arg);
      argv.push_back(value);
    }
  }
  return argv;
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789-_./=:,+@%") == std::string::npos;
    std::string q = a;
    if (!plain) {
      q = "'";
      for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      q += "'";
    }
    out += (out.empty() ? "" : " ") + q;
  }
  return out;
}

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_interrupted != 0; }

RunResult run_logged(const std::vector<std::string>& argv, const std::string& stdout_path,
                     const std::string& stderr_path, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const int out = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0 || err < 0) {
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    throw IoError("cannot create the experiment's logs " + stdout_path + " / " + stderr_path);
  }
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("cannot start an experiment: fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a time limit stops mpirun and every rank together
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execvp(cargv[0], cargv.data());
    const std::string msg = std::string(cargv[0]) + ": cannot run it (not found or not executable)\n";
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out);
  ::close(err);
  RunResult r;
  int status = 0;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  double kill_at = -1;  // SIGKILL time once SIGTERM went out
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    const double now = elapsed();
    const bool over = timeout_s > 0 && now > timeout_s;
    if (kill_at < 0 && (over || interrupted())) {
      r.timed_out = over;
      r.interrupted = !over;
      ::kill(-pid, SIGTERM);
      kill_at = now + 15;
    } else if (kill_at >= 0 && now > kill_at) {
      ::kill(-pid, SIGKILL);
      kill_at = 1e300;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  r.seconds = elapsed();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string tail_lines(const std::string& path, int n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(line);
    if (int(lines.size()) > n) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

}  // namespace ds::autotune
