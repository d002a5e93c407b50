// The fallback backend: a pool of threads doing blocking pread/pwrite, one block at a time each.
// Used when io_uring is refused (io_uring_setup blocked by a container's seccomp profile, or
// io_uring_disabled), for files on file systems without O_DIRECT (tmpfs), and when
// DS_AIO_BACKEND=threads. `threads` blocking calls in flight play the role of the queue depth.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "aio/block_executor.h"

namespace ds::aio {

class ThreadBackend final : public BlockExecutor {
 public:
  explicit ThreadBackend(int threads);
  ~ThreadBackend() override;
  ThreadBackend(const ThreadBackend&) = delete;
  ThreadBackend& operator=(const ThreadBackend&) = delete;

  void execute(std::vector<Block> blocks) override;
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Block> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// One blocking transfer of `b` (pread or pwrite, EINTR retried): bytes moved or -errno.
int64_t transfer_blocking(const Block& b);

}  // namespace ds::aio
