// The async I/O engine behind NVMe offload: submit a read or write of a file range, get a handle,
// wait for it (or for everything). io_uring with O_DIRECT where the kernel and file system allow
// it; a pread/pwrite thread pool otherwise (one warning says why). See docs/aio.md.
//
// Contract for a request {path, buffer, bytes, offset}:
//  - `buffer` is 4 KiB-aligned and has room for align_up(bytes) bytes (an AlignedBuffer does);
//    `offset` is a multiple of 4 KiB. `bytes` may be anything >= 0: the last block is padded in
//    the buffer. A write whose length is not a multiple of 4 KiB must end the file: the padding
//    is trimmed (ftruncate) so the file's size is offset + bytes.
//  - A read of bytes past the end of the file fails ("short read").
//  - Requests in flight at the same time must not overlap in the same file.
//  - Open failures (missing directory, not a directory, permission) throw ds::IoError from
//    submit(); transfer failures (disk full, file-size limit, I/O error, short read) throw from
//    wait()/wait_all(). Each message names the operation, the file, offset, length and strerror.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "aio/aio_options.h"
#include "aio/aligned_buffer.h"
#include "aio/io_file.h"

namespace ds::aio {

struct IoRequest {
  IoOp op = IoOp::Read;
  std::string path;
  std::byte* buffer = nullptr;  // read: destination; write: source (not modified)
  int64_t bytes = 0;
  int64_t offset = 0;
};

struct IoHandle {
  uint64_t id = 0;
};

// The interface swappers program against: AioEngine is the real one; tests decorate it (delays,
// event logs) without touching a disk's timing.
class AsyncIo {
 public:
  virtual ~AsyncIo() = default;
  virtual IoHandle submit(const IoRequest& request) = 0;
  // Waits for one request; throws ds::IoError if it failed. Each handle is waited once.
  virtual void wait(IoHandle handle) = 0;
  // Waits for every outstanding request, then throws the first failure (if any).
  virtual void wait_all() = 0;

  IoHandle submit_read(const std::string& path, void* buffer, int64_t bytes, int64_t offset = 0);
  IoHandle submit_write(const std::string& path, const void* buffer, int64_t bytes,
                        int64_t offset = 0);
  void read(const std::string& path, void* buffer, int64_t bytes, int64_t offset = 0) {
    wait(submit_read(path, buffer, bytes, offset));
  }
  void write(const std::string& path, const void* buffer, int64_t bytes, int64_t offset = 0) {
    wait(submit_write(path, buffer, bytes, offset));
  }
};

class BlockExecutor;
class RequestState;

class AioEngine final : public AsyncIo {
 public:
  // Validates `options` (ConfigError naming the aio key). Backend::Uring (or DS_AIO_BACKEND=uring)
  // throws ds::NotSupported when io_uring is refused; Auto falls back with one warning.
  explicit AioEngine(const AioOptions& options = {});
  ~AioEngine() override;  // waits for outstanding requests (errors dropped)
  AioEngine(const AioEngine&) = delete;
  AioEngine& operator=(const AioEngine&) = delete;

  IoHandle submit(const IoRequest& request) override;
  void wait(IoHandle handle) override;
  void wait_all() override;

  // Uring or Threads: the backend O_DIRECT files go to (buffered files always use the threads).
  Backend backend() const { return backend_; }
  // Why io_uring is not used (empty when it is, or when DS_AIO_BACKEND=threads asked for that).
  const std::string& uring_unavailable_reason() const { return uring_why_not_; }
  // Why some file was opened without O_DIRECT (first one seen; empty if none).
  std::string buffered_reason() const;
  const AioOptions& options() const { return options_; }
  int64_t in_flight() const;

 private:
  BlockExecutor& threads();

  AioOptions options_;
  Backend backend_ = Backend::Threads;
  std::string uring_why_not_;
  std::unique_ptr<BlockExecutor> uring_;
  std::unique_ptr<BlockExecutor> threads_;
  mutable std::mutex mu_;  // guards requests_, next_id_, threads_ creation, buffered_why_
  std::unordered_map<uint64_t, std::shared_ptr<RequestState>> requests_;
  uint64_t next_id_ = 1;
  std::string buffered_why_;
};

}  // namespace ds::aio
