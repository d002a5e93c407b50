// The per-rank wrapper (see rank_shim.h).
#include "launcher/rank_shim.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "launcher/child_process.h"
#include "launcher/exit_status.h"
#include "util/error.h"

namespace ds::launcher {
namespace {

int rank_from_env() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

// Points stdout and stderr at one file, like DeepSpeed's launch.py (stdout=log_fd, stderr=log_fd).
void redirect_output(const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DS_CHECK(fd >= 0, IoError, "--enable_each_rank_log: cannot write " + path + ": " + std::strerror(errno));
  dup2(fd, STDOUT_FILENO);
  dup2(fd, STDERR_FILENO);
  close(fd);
}

}  // namespace

RankShimOptions parse_rank_shim_args(const std::vector<std::string>& args) {
  RankShimOptions o;
  size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    DS_CHECK(i + 1 < args.size(), Error, "--rank_shim: option " + args[i] + " needs a value");
    if (args[i] == "--status_dir") o.status_dir = args[++i];
    else if (args[i] == "--rank_log") o.rank_log_prefix = args[++i];
    else throw Error("--rank_shim: unknown option " + args[i]);
  }
  DS_CHECK(i + 1 < args.size(), Error, "--rank_shim: expected '-- <program> [args...]'");
  o.program.assign(args.begin() + static_cast<long>(i) + 1, args.end());
  return o;
}

int run_rank_shim(const RankShimOptions& o) {
  const int rank = rank_from_env();
  if (!o.rank_log_prefix.empty()) redirect_output(o.rank_log_prefix + "rank" + std::to_string(rank) + ".log");
  // The forwarder outlives the child so a second SIGTERM from mpirun cannot stop the record.
  SignalForwarder forwarder(SignalForwarding::kAll);
  const ChildExit end = run_child(o.program, {}, SignalForwarding::kAll);
  if (!o.status_dir.empty()) write_rank_exit(o.status_dir, {rank, end.signaled, end.code});
  return end.shell_code();
}

}  // namespace ds::launcher
