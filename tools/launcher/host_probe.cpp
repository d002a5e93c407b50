// rsh agent lookup and the `agent host true` probe (see host_probe.h).
#include "launcher/host_probe.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <thread>

#include "launcher/mpirun_command.h"

namespace ds::launcher {
namespace {

std::string first_agent(std::string list) {
  if (const size_t colon = list.find(':'); colon != std::string::npos) list.resize(colon);
  return list;
}

}  // namespace

std::vector<std::string> rsh_agent(const std::vector<std::string>& launcher_args,
                                   const std::vector<std::string>& environment) {
  std::string agent;
  for (size_t i = 0; i + 2 < launcher_args.size(); ++i)
    if ((launcher_args[i] == "--mca" || launcher_args[i] == "-mca") &&
        (launcher_args[i + 1] == "plm_rsh_agent" || launcher_args[i + 1] == "orte_rsh_agent"))
      agent = launcher_args[i + 2];
  if (agent.empty())
    for (const std::string& e : environment)
      if (e.rfind("OMPI_MCA_plm_rsh_agent=", 0) == 0) agent = e.substr(e.find('=') + 1);
  std::vector<std::string> argv = split_launcher_args(first_agent(agent.empty() ? "ssh" : agent));
  if (argv.empty()) argv = {"ssh"};
  if (argv.size() == 1 && argv[0] == "ssh") argv = {"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"};
  return argv;
}

bool host_reachable(const std::string& host, const std::vector<std::string>& agent,
                    const std::vector<std::string>& local_names, double timeout_s) {
  if (is_local_host(host, local_names)) return true;
  std::vector<std::string> words = agent;
  words.push_back(host);
  words.push_back("true");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    setpgid(0, 0);  // its own group: a timed-out probe goes with everything it started
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execvp(argv[0], argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (done < 0 && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ds::launcher
