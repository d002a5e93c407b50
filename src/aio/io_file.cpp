#include "aio/io_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace ds::aio {
namespace {

const char* hint_for(int err) {
  switch (err) {
    case ENOENT: return "the file or its directory does not exist: check nvme_path";
    case ENOTDIR: return "a component of the path is not a directory";
    case EISDIR: return "the path is a directory, not a file";
    case EACCES:
    case EPERM: return "permission denied: make the directory writable or choose another nvme_path";
    case EROFS: return "the file system is mounted read-only";
    case ENOSPC:
    case EDQUOT: return "disk full: free space or point nvme_path at a larger disk";
    case EFBIG:
      return "file too large: the disk is full or the file-size limit (ulimit -f) is exceeded";
    case EINVAL: return "the kernel rejected the request (O_DIRECT alignment or file system)";
    case EIO: return "device I/O error: check the disk (dmesg)";
    default: return nullptr;
  }
}

bool is_memory_fs(int fd) {
  struct statfs s {};
  if (::fstatfs(fd, &s) != 0) return false;
  return s.f_type == TMPFS_MAGIC || s.f_type == RAMFS_MAGIC;
}

}  // namespace

const char* to_string(IoOp op) { return op == IoOp::Read ? "read" : "write"; }

void UniqueFd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message (maybe not in buf).
  return ::strerror_r(err, buf, sizeof buf);
}

std::string io_error_text(const std::string& op, const std::string& path, int64_t offset,
                          int64_t bytes, int err) {
  std::string s = "aio " + op + " \"" + path + "\" (offset " + std::to_string(offset) + ", " +
                  std::to_string(bytes) + " bytes): " + errno_text(err);
  if (const char* h = hint_for(err)) s += std::string(" (") + h + ")";
  return s;
}

OpenedFile open_for_io(IoOp op, const std::string& path, int64_t offset, int64_t bytes) {
  const int base = (op == IoOp::Read ? O_RDONLY : (O_WRONLY | O_CREAT)) | O_CLOEXEC;
  const std::string what = std::string(to_string(op)) + " (open)";
  OpenedFile f;
  int fd = ::open(path.c_str(), base | O_DIRECT, 0600);
  if (fd < 0 && errno == EINVAL) {
    // The file system refuses O_DIRECT: fall back to buffered I/O (correct, only slower).
    fd = ::open(path.c_str(), base, 0600);
    if (fd >= 0) f.buffered_why = "the file system of \"" + path + "\" refuses O_DIRECT";
  } else if (fd >= 0) {
    f.direct = true;
  }
  if (fd < 0) throw IoError(io_error_text(what, path, offset, bytes, errno));
  f.fd = UniqueFd(fd);
  if (f.direct && is_memory_fs(fd)) {
    // tmpfs accepts O_DIRECT since Linux 6.6 but it means nothing there (the data is the page
    // cache); older kernels refuse it. Either way: buffered, so behaviour is the same everywhere.
    if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT) != 0)
      throw IoError(io_error_text(what + " fcntl", path, offset, bytes, errno));
    f.direct = false;
    f.buffered_why = "\"" + path + "\" is on tmpfs (memory), where O_DIRECT does not apply";
  }
  return f;
}

}  // namespace ds::aio
