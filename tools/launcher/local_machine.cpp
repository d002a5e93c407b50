// Facts about the local machine (see local_machine.h).
#include "launcher/local_machine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace ds::launcher {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

// /sys/devices/system/node/online holds a list like "0" or "0-1" or "0,2-3".
int numa_nodes() {
  std::ifstream in("/sys/devices/system/node/online");
  std::string list;
  if (!(in >> list)) return 1;
  int count = 0;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string range = list.substr(pos, end - pos);
    const size_t dash = range.find('-');
    try {
      count += dash == std::string::npos ? 1 : std::stoi(range.substr(dash + 1)) - std::stoi(range.substr(0, dash)) + 1;
    } catch (const std::exception&) {
      return 1;
    }
    pos = end + 1;
  }
  return std::max(1, count);
}

std::vector<std::string> local_host_names() {
  std::vector<std::string> names = {"localhost", "127.0.0.1"};
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0') {
    const std::string full = buf;
    names.push_back(full);
    const std::string short_name = full.substr(0, full.find('.'));
    if (short_name != full) names.push_back(short_name);
  }
  return names;
}

bool running_as_root() { return geteuid() == 0; }

std::string self_executable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("ds-run") : path.string();
}

std::string sibling_tool(const std::string& name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return name;
  const auto candidate = self.parent_path() / name;
  return std::filesystem::exists(candidate, ec) ? candidate.string() : name;
}

}  // namespace ds::launcher
