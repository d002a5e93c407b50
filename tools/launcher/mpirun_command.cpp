// mpirun command building (see mpirun_command.h for the shape and why).
#include "launcher/mpirun_command.h"

#include <algorithm>

#include "util/error.h"

namespace ds::launcher {
namespace {

bool default_slots(const HostSlots& h) {
  for (size_t i = 0; i < h.slots.size(); ++i)
    if (h.slots[i] != static_cast<int>(i)) return false;
  return true;
}

std::string join_ints(const std::vector<int>& values) {
  std::string out;
  for (int v : values) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return out;
}

// The -x options every app context carries (Open MPI applies -x per context, not globally).
std::vector<std::string> export_args(const MpirunOptions& o) {
  std::vector<std::string> args = {"-x", "MASTER_ADDR=" + o.master_addr, "-x",
                                   "MASTER_PORT=" + std::to_string(o.master_port)};
  if (o.bind_cores_to_rank) args.insert(args.end(), {"-x", "DS_BIND_CORES_TO_RANK=1"});
  for (const std::string& name : o.forward_names) args.insert(args.end(), {"-x", name});
  for (const auto& [name, value] : o.forward_values) args.insert(args.end(), {"-x", name + "=" + value});
  return args;
}

std::vector<std::string> rank_command(const MpirunOptions& o) {
  std::vector<std::string> cmd;
  if (!o.shim.empty()) {
    cmd = {o.shim, "--rank_shim"};
    if (!o.status_dir.empty()) cmd.insert(cmd.end(), {"--status_dir", o.status_dir});
    if (!o.rank_log_prefix.empty()) cmd.insert(cmd.end(), {"--rank_log", o.rank_log_prefix});
    cmd.push_back("--");
  }
  cmd.insert(cmd.end(), o.program.begin(), o.program.end());
  return cmd;
}

}  // namespace

bool is_local_host(const std::string& host, const std::vector<std::string>& local_names) {
  return std::find(local_names.begin(), local_names.end(), host) != local_names.end();
}

MpirunCommand build_mpirun_command(const MpirunOptions& o) {
  DS_CHECK(!o.program.empty(), Error, "no program to launch (usage: ds-run [options] <program> [args...])");
  ActiveResources hosts;
  for (const HostSlots& h : o.resources)
    if (!h.slots.empty()) hosts.push_back(h);  // a host whose slots were all excluded starts nothing
  DS_CHECK(!hosts.empty(), Error, "no rank to start: every host was filtered out or has 0 slots");

  int local_ranks = 0;
  for (const HostSlots& h : hosts)
    if (is_local_host(h.host, o.local_names)) local_ranks += static_cast<int>(h.slots.size());

  MpirunCommand cmd;
  if (o.as_root) cmd.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  // Open MPI binds each rank to one core when it starts 2 or fewer, which would pin a rank's whole
  // OpenMP pool to one core; binding is the engine's job (DS_BIND_CORES_TO_RANK), so turn it off.
  cmd.argv = {o.mpirun, "--bind-to", "none"};
  if (local_ranks > o.local_cores) cmd.argv.push_back("--oversubscribe");
  // Across hosts: notice a silent host in about 15 s (TCP keepalive on mpirun's daemon links) instead of
  // Open MPI's 8 minutes, so a dead host or a cut link ends the job rather than hanging mpirun.
  const bool remote = std::any_of(hosts.begin(), hosts.end(),
                                  [&](const HostSlots& h) { return !is_local_host(h.host, o.local_names); });
  const bool user_keepalive = std::any_of(o.launcher_args.begin(), o.launcher_args.end(), [](const std::string& a) {
    return a.find("oob_tcp_keepalive") != std::string::npos;
  });
  if (remote && !user_keepalive)
    cmd.argv.insert(cmd.argv.end(), {"--mca", "oob_tcp_keepalive_time", "3", "--mca", "oob_tcp_keepalive_intvl", "2",
                                     "--mca", "oob_tcp_keepalive_probes", "5"});
  cmd.argv.insert(cmd.argv.end(), o.launcher_args.begin(), o.launcher_args.end());

  const std::vector<std::string> exports = export_args(o);
  const std::vector<std::string> rank_cmd = rank_command(o);
  if (std::all_of(hosts.begin(), hosts.end(), default_slots)) {
    std::string host_list;
    for (const HostSlots& h : hosts) {
      if (!host_list.empty()) host_list += ',';
      host_list += h.host + ":" + std::to_string(h.slots.size());
    }
    cmd.argv.insert(cmd.argv.end(), {"-np", std::to_string(count_ranks(hosts)), "-H", host_list});
    cmd.argv.insert(cmd.argv.end(), exports.begin(), exports.end());
    cmd.argv.insert(cmd.argv.end(), rank_cmd.begin(), rank_cmd.end());
    return cmd;
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    const HostSlots& h = hosts[i];
    const std::string n = std::to_string(h.slots.size());
    if (i > 0) cmd.argv.push_back(":");
    cmd.argv.insert(cmd.argv.end(), {"-np", n, "-H", h.host + ":" + n});
    cmd.argv.insert(cmd.argv.end(), exports.begin(), exports.end());
    cmd.argv.insert(cmd.argv.end(), {"-x", "CUDA_VISIBLE_DEVICES=" + join_ints(h.slots)});
    cmd.argv.insert(cmd.argv.end(), rank_cmd.begin(), rank_cmd.end());
  }
  return cmd;
}

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789_@%+=:,./-") == std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string format_command(const MpirunCommand& command) {
  std::string line;
  for (const auto& [name, value] : command.env) line += name + "=" + shell_quote(value) + " ";
  for (size_t i = 0; i < command.argv.size(); ++i) {
    if (i > 0) line += ' ';
    line += shell_quote(command.argv[i]);
  }
  return line;
}

std::vector<std::string> split_launcher_args(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) quote = 0;
      else word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  DS_CHECK(quote == 0, Error, "--launcher_args: unbalanced quote in '" + text + "'");
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace ds::launcher
