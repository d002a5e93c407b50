// Writability probes (see writable_path.h).
#include "util/writable_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace ds {
namespace {

namespace fs = std::filesystem;

// The nearest ancestor of `p` that exists (p itself included), or "" when none does.
fs::path nearest_existing(fs::path p) {
  std::error_code ec;
  while (!p.empty()) {
    if (fs::exists(fs::symlink_status(p, ec))) return p;
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  return {};
}

// A file no other process or thread picks: pid and a counter.
std::string probe_name() {
  static std::atomic<unsigned> counter{0};
  return ".ds_write_probe." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace

std::string writable_dir_problem(const std::string& dir) {
  if (dir.empty()) return "the path is empty";
  std::error_code ec;
  const fs::path p(dir);
  if (fs::exists(p, ec) && !fs::is_directory(p, ec)) return dir + " exists and is not a directory";
  if (!fs::is_directory(p, ec)) {
    fs::create_directories(p, ec);
    if (!fs::is_directory(p)) {  // another rank may have made it meanwhile: only its absence counts
      const fs::path found = nearest_existing(p.parent_path());
      if (!found.empty() && !fs::is_directory(found))
        return found.string() + " is a file, not a directory, so " + dir + " cannot be created";
      return "cannot create it: " + (ec ? ec.message() : std::string("unknown error"));
    }
  }
  const std::string probe = (p / probe_name()).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot create files in it: " + std::string(std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

std::string writable_file_problem(const std::string& file) {
  if (file.empty()) return "the path is empty";
  std::error_code ec;
  const fs::path p(file);
  if (fs::is_directory(p, ec)) return file + " is a directory, not a file";
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (std::string why = writable_dir_problem(parent.string()); !why.empty()) return "its folder: " + why;
  if (!fs::exists(p, ec)) return "";
  if (!fs::is_regular_file(p, ec)) return file + " exists and is not a regular file";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);  // no O_TRUNC: the check changes nothing
  if (fd < 0) return "cannot write it: " + std::string(std::strerror(errno));
  ::close(fd);
  return "";
}

}  // namespace ds
