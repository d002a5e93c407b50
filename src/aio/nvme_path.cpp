#include "aio/nvme_path.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "aio/io_file.h"
#include "util/error.h"

namespace ds::aio {

void validate_nvme_path(const std::string& path, const std::string& key) {
  if (path.empty())
    throw ConfigError(key, "is empty (set it to a writable directory on a local SSD)");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    throw ConfigError(key, "\"" + path + "\" " +
                               (err == ENOENT ? std::string("does not exist")
                                              : "cannot be accessed: " + errno_text(err)) +
                               " (create it or point it at a writable directory on a local SSD)");
  }
  if (!S_ISDIR(st.st_mode))
    throw ConfigError(key, "\"" + path + "\" is not a directory (point it at a directory on a "
                           "local SSD; the swap files are created inside it)");
  std::string probe = path + "/.ds_write_probe_XXXXXX";
  std::vector<char> tmpl(probe.begin(), probe.end());
  tmpl.push_back('\0');
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    throw ConfigError(key, "\"" + path + "\" is not writable: " + errno_text(errno) +
                               " (fix its permissions or choose another directory)");
  }
  ::close(fd);
  ::unlink(tmpl.data());
}

DiskSpace disk_space(const std::string& path) {
  struct statvfs s {};
  if (::statvfs(path.c_str(), &s) != 0)
    throw IoError("statvfs \"" + path + "\": " + errno_text(errno));
  return {static_cast<uint64_t>(s.f_bavail) * s.f_frsize,
          static_cast<uint64_t>(s.f_blocks) * s.f_frsize};
}

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1ull << 20));
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  return buf;
}

void check_free_space(const std::string& path, uint64_t needed_bytes, const std::string& key) {
  const DiskSpace d = disk_space(path);
  if (d.free_bytes >= needed_bytes) return;
  throw ConfigError(key, "needs " + format_bytes(needed_bytes) + " on " + path + ", " +
                             format_bytes(d.free_bytes) +
                             " free (free some space, point it at a larger disk, or offload less)");
}

}  // namespace ds::aio

namespace ds::aio {

bool same_file_system(const std::string& a, const std::string& b) {
  struct stat sa{}, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev;
}

}  // namespace ds::aio
