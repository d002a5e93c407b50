// The real ds-serve binary for tests: started on 127.0.0.1 at a free port (--port 0, the port read
// from its first line), stopped with SIGTERM (exit status returned) or killed if a test ends early;
// and shell commands (curl, node) run with their stdout captured.
#pragma once

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace ds::serve::testing {

inline std::filesystem::path serve_binary() { return std::filesystem::path(DS_BINARY_DIR) / "tools/ds-serve"; }

struct CommandResult {
  int status = -1;  // exit status
  std::string out;  // stdout
};

inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class ServeProcess {
 public:
  // Starts ds-serve with `args` (after --model-dir DIR --port 0) and waits for its listening line.
  // `launcher` goes before the binary (mpirun -np 2 ...: the process is then mpirun, which forwards
  // SIGTERM to every rank).
  ServeProcess(const std::string& model_dir, const std::vector<std::string>& args,
               const std::vector<std::string>& launcher = {}) {
    int out[2];
    if (pipe(out) != 0) return;
    std::vector<std::string> argv = launcher;
    for (std::string a : {serve_binary().string(), std::string("--model-dir"), model_dir, std::string("--port"), std::string("0")})
      argv.push_back(a);
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execvp(cargv[0], cargv.data());
      _exit(127);
    }
    close(out[1]);
    out_ = fdopen(out[0], "r");
    char line[1024];
    while (out_ && std::fgets(line, sizeof line, out_)) {
      banner_ = line;
      const auto at = banner_.find("listening on http://127.0.0.1:");
      if (at != std::string::npos) {
        port_ = std::stoi(banner_.substr(at + 30));
        break;
      }
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_) fclose(out_);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& banner() const { return banner_; }
  std::string url(const std::string& path = "") const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  // SIGTERM, then the exit status (-1: killed by a signal or still running after `wait`).
  int terminate(std::chrono::seconds wait = std::chrono::seconds(30)) {
    kill(pid_, SIGTERM);
    const auto end = std::chrono::steady_clock::now() + wait;
    int st = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  int port_ = 0;
  bool exited_ = false;
  std::string banner_;
};

}  // namespace ds::serve::testing
