#include "aio/thread_backend.h"

#include <unistd.h>

#include <cerrno>

namespace ds::aio {

int64_t transfer_blocking(const Block& b) {
  while (true) {
    const ssize_t n = b.req->op() == IoOp::Read
                          ? ::pread(b.req->fd(), b.buf, static_cast<size_t>(b.length), b.file_offset)
                          : ::pwrite(b.req->fd(), b.buf, static_cast<size_t>(b.length), b.file_offset);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

ThreadBackend::ThreadBackend(int threads) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

ThreadBackend::~ThreadBackend() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadBackend::execute(std::vector<Block> blocks) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& b : blocks) queue_.push_back(std::move(b));
  }
  cv_.notify_all();
}

void ThreadBackend::run() {
  while (true) {
    Block b;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      b = std::move(queue_.front());
      queue_.pop_front();
    }
    while (!apply_result(b, transfer_blocking(b))) {
    }
    auto req = std::move(b.req);
    req->block_done();
  }
}

}  // namespace ds::aio
