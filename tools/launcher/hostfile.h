// DeepSpeed hostfiles (`worker-0 slots=4`): the resource pool a launch may draw ranks from.
// Parsing follows deepspeed/launcher/runner.py (_parse_hostfile): `#` comments and blank lines are
// skipped, each other line must match `^(\S+)\s+slots=(\d+)`, a host may appear once, and a file
// with no host is an error. Our errors also name the file and line, which DeepSpeed's do not.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::launcher {

// DeepSpeed's default hostfile path (DLTS_HOSTFILE in runner.py).
inline constexpr const char* kDefaultHostfile = "/job/hostfile";

struct HostEntry {
  std::string host;
  int slots = 0;
  bool operator==(const HostEntry&) const = default;
};

// Hosts in hostfile order: the order decides which ranks land where (rank 0 on the first host).
using ResourcePool = std::vector<HostEntry>;

// Parses hostfile text; `source` (a path) prefixes every error ("hf:3: ..."). Throws ds::Error.
ResourcePool parse_hostfile(std::string_view text, const std::string& source);

// Reads and parses `path`; std::nullopt when no such regular file exists (DeepSpeed then falls
// back to local resources). Throws ds::Error when it exists but cannot be read or parsed.
std::optional<ResourcePool> read_hostfile(const std::string& path);

}  // namespace ds::launcher
