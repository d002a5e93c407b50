// Checks an nvme_path before training starts, so a bad path or a small disk is refused at init
// with numbers (DESIGN.md §5) instead of failing in the middle of the first optimizer step.
// `key` is the config key the path came from ("zero_optimization.offload_optimizer.nvme_path"),
// so the ConfigError names it.
#pragma once

#include <cstdint>
#include <string>

namespace ds::aio {

// Throws ConfigError(key, ...) unless `path` exists, is a directory and a file can be created in
// it (probed with a temporary file: access(2) is wrong for root and for read-only mounts).
void validate_nvme_path(const std::string& path, const std::string& key);

struct DiskSpace {
  uint64_t free_bytes = 0;   // available to this (unprivileged) user: statvfs f_bavail
  uint64_t total_bytes = 0;
};

// statvfs of the file system holding `path`; throws ds::IoError naming the path.
DiskSpace disk_space(const std::string& path);

// Throws ConfigError(key, "needs 58.2 GiB on /mnt/nvme, 41.0 GiB free (...)") when the file system
// holding `path` has less than `needed_bytes` available.
void check_free_space(const std::string& path, uint64_t needed_bytes, const std::string& key);

// True when both paths are on one file system (same st_dev), so their free space is shared.
bool same_file_system(const std::string& a, const std::string& b);

// "58.2 GiB" (one decimal; MiB below 1 GiB, bytes below 1 MiB).
std::string format_bytes(uint64_t bytes);

}  // namespace ds::aio
