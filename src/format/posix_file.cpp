// POSIX I/O loops for the checkpoint layer: every errno turns into an IoError naming the file.
#include "format/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace ds::format {

void UniqueFd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);  // errors ignored: the caller chose not to care (see close())
  fd_ = -1;
}

void UniqueFd::close(const std::string& path) {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  // No retry on EINTR: Linux has released the descriptor either way, and a retry could close a
  // descriptor another thread just opened.
  if (::close(fd) != 0) throw_errno(path, "close", errno);
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (possibly a static string, not buf).
  const char* msg = ::strerror_r(err, buf, sizeof(buf));
  return msg ? std::string(msg) : "errno " + std::to_string(err);
}

void throw_errno(const std::string& path, const std::string& op, int err, const std::string& hint) {
  throw IoError(path + ": " + op + " failed: " + errno_text(err) + hint);
}

static std::string open_hint(int err) {
  switch (err) {
    case ENOENT: return " (does the directory exist?)";
    case EACCES:
    case EPERM: return " (check the permissions of the file and its directory)";
    case EROFS: return " (the file system is read-only)";
    case ENOSPC: return " (the disk is full)";
    case ENOTDIR: return " (a component of the path is not a directory)";
    default: return "";
  }
}

UniqueFd open_file(const std::string& path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    throw_errno(path, "open", err, open_hint(err));
  }
  return UniqueFd(fd);
}

uint64_t file_size(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno(path, "fstat", errno);
  if (!S_ISREG(st.st_mode)) throw IoError(path + ": not a regular file");
  return static_cast<uint64_t>(st.st_size);
}

void pread_exact(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  auto* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_errno(path, "read at offset " + std::to_string(offset + done), errno);
    }
    if (got == 0) {
      throw IoError(path + ": unexpected end of file at offset " + std::to_string(offset + done) +
                    " (wanted " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                    "; was the file truncated or rewritten while open?)");
    }
    done += static_cast<size_t>(got);
  }
}

void write_all(int fd, const void* src, size_t n, const std::string& path) {
  const auto* in = static_cast<const char*>(src);
  size_t done = 0;
  while (done < n) {
    const ssize_t put = ::write(fd, in + done, n - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw_errno(path, "write", err, err == ENOSPC ? " (the disk is full)" : "");
    }
    done += static_cast<size_t>(put);
  }
}

void fsync_fd(int fd, const std::string& path) {
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) throw_errno(path, "fsync", errno);
}

void fsync_directory(const std::string& dir) {
  UniqueFd fd = open_file(dir, O_RDONLY | O_DIRECTORY);
  fsync_fd(fd.get(), dir);
  fd.close(dir);
}

std::string parent_directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace ds::format
