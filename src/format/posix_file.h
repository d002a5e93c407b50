// RAII file descriptors and the POSIX I/O loops the checkpoint layer is built on (EINTR, short
// reads and writes, fsync of files and directories). Every failure becomes a ds::IoError that
// names the file, the operation and strerror, so a user can tell a full disk from a missing mount.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace ds::format {

// Owns one file descriptor; move-only. The destructor closes and ignores errors (destructors never
// throw); writers that care about close() errors (NFS reports deferred write errors there) call
// close() explicitly.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset() noexcept;
  // Closes and throws IoError("<path>: close failed: ...") if the kernel reports an error.
  void close(const std::string& path);

 private:
  int fd_ = -1;
};

// strerror text for `err` (thread-safe).
std::string errno_text(int err);

// Throws IoError "<path>: <op> failed: <strerror(err)><hint>".
[[noreturn]] void throw_errno(const std::string& path, const std::string& op, int err,
                              const std::string& hint = "");

// open(2) with O_CLOEXEC added; throws with op "open" (plus a hint for the common errnos).
UniqueFd open_file(const std::string& path, int flags, mode_t mode = 0644);

// Size of the open file in bytes (fstat).
uint64_t file_size(int fd, const std::string& path);

// Reads exactly `n` bytes at `offset`; a short read (the file shrank under us) throws.
void pread_exact(int fd, void* dst, size_t n, uint64_t offset, const std::string& path);

// Writes all `n` bytes at the current position, retrying short writes and EINTR.
void write_all(int fd, const void* src, size_t n, const std::string& path);

void fsync_fd(int fd, const std::string& path);

// fsync of a directory, so a rename inside it survives a power loss.
void fsync_directory(const std::string& dir);

// "a/b/c.safetensors" → "a/b"; "c.safetensors" → ".".
std::string parent_directory(const std::string& path);

}  // namespace ds::format
