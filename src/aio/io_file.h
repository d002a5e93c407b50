// Opening files for direct I/O and naming failures. O_DIRECT is what makes NVMe offload fast
// (no page-cache copy, no cache pollution), but some file systems refuse it (EINVAL on open, e.g.
// tmpfs before Linux 6.6) or ignore it (tmpfs since 6.6): those files are opened buffered and
// served by the thread pool, and the engine warns once. Every failure is a ds::IoError that names
// the operation, the file, the offset and length, strerror and a hint, e.g.
//   aio write "/mnt/nvme/x.swp" (offset 0, 1048576 bytes): No space left on device (disk full: ...)
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace ds::aio {

enum class IoOp { Read, Write };
const char* to_string(IoOp op);  // "read", "write"

// Owns a file descriptor; move-only; the destructor closes and ignores errors.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept;

 private:
  int fd_ = -1;
};

struct OpenedFile {
  UniqueFd fd;
  bool direct = false;        // O_DIRECT is in effect
  std::string buffered_why;   // when !direct: why ("/dev/shm is tmpfs", "... refuses O_DIRECT")
};

// Opens `path` for `op` (read: O_RDONLY; write: O_WRONLY|O_CREAT, mode 0600, as DeepSpeed) with
// O_DIRECT when the file system honours it. `offset`/`bytes` only feed the error text.
OpenedFile open_for_io(IoOp op, const std::string& path, int64_t offset, int64_t bytes);

// `aio <op> "<path>" (offset O, N bytes): <strerror(err)> (<hint>)`.
std::string io_error_text(const std::string& op, const std::string& path, int64_t offset,
                          int64_t bytes, int err);

// strerror text (thread-safe).
std::string errno_text(int err);

}  // namespace ds::aio
