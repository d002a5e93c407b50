#include "offload/swap_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <system_error>

#include "aio/nvme_path.h"
#include "util/error.h"

namespace ds::offload {

namespace fs = std::filesystem;

SwapDirectory::SwapDirectory(const std::string& nvme_path, int zero_stage, int rank,
                             const std::string& key, const std::string& kind) {
  aio::validate_nvme_path(nvme_path, key);
  root_ = (fs::path(nvme_path) / ("zero_stage_" + std::to_string(zero_stage))).string();
  path_ = (fs::path(root_) / kind / ("rank" + std::to_string(rank))).string();
  std::error_code ec;
  const std::string lock = path_ + ".lock";
  // Another rank's engine going away removes the shared parents when it finds them empty, which
  // can happen between our mkdir and open: create them again and retry.
  for (int attempt = 0; lock_fd_ < 0; ++attempt) {
    const fs::path parent = fs::path(path_).parent_path();
    fs::create_directories(parent, ec);
    if (ec && !fs::is_directory(parent)) {  // racing another rank's mkdir or rmdir: try again
      if (attempt >= 100) throw IoError("cannot create the swap folder \"" + parent.string() + "\": " + ec.message());
      continue;
    }
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0 && (errno != ENOENT || attempt >= 100))
      throw IoError("cannot open \"" + lock + "\": " + std::strerror(errno));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    throw ConfigError(key, "\"" + path_ +
                                              "\" is in use by another engine or process on this machine (each "
                                              "rank's swap folder has one owner); give each job its own nvme_path");
  }
  fs::remove_all(path_, ec);  // stale swap files: never trust what a previous run left
  if (ec)
    throw IoError("cannot remove the stale swap folder \"" + path_ + "\": " + ec.message());
  fs::create_directories(path_, ec);
  if (ec) throw IoError("cannot create the swap folder \"" + path_ + "\": " + ec.message());
}

SwapDirectory::~SwapDirectory() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  fs::remove(path_ + ".lock", ec);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  // Parents go only when empty (other ranks and kinds share them): remove() fails harmlessly otherwise.
  fs::remove(fs::path(path_).parent_path(), ec);
  fs::remove(root_, ec);
}

std::string SwapDirectory::file(int64_t sub_group, const std::string& state) const {
  return path_ + "/sub_group_" + std::to_string(sub_group) + "." + state + ".tensor.swp";
}

}  // namespace ds::offload
