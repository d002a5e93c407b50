// One submitted I/O request as the backends see it: the open file, its completion state, and the
// blocks (<= block_size bytes each) it was cut into. Backends execute blocks in any order and on
// any thread; the last block to finish finalizes the request (trims a padded tail, closes the
// file) and wakes the waiter. Internal to ds_aio.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aio/io_file.h"

namespace ds::aio {

class RequestState {
 public:
  RequestState(IoOp op, std::string path, OpenedFile file, std::byte* buffer, int64_t bytes,
               int64_t offset);

  IoOp op() const { return op_; }
  const std::string& path() const { return path_; }
  int fd() const { return file_.fd.get(); }
  bool direct() const { return file_.direct; }
  std::byte* buffer() const { return buffer_; }
  int64_t bytes() const { return bytes_; }
  int64_t offset() const { return offset_; }

  void set_block_count(int64_t n) { blocks_left_.store(n); }
  // Records the first failure (later ones are consequences and would only confuse).
  void fail(std::string message);
  // Called once per finished block (failed or not); the last call finalizes.
  void block_done() noexcept;
  bool done() const;
  // Blocks until finalized; throws ds::IoError with the first failure.
  void wait();

 private:
  void finalize() noexcept;

  IoOp op_;
  std::string path_;
  OpenedFile file_;
  std::byte* buffer_;
  int64_t bytes_;
  int64_t offset_;
  std::atomic<int64_t> blocks_left_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
};

// A piece of a request: `length` bytes (a multiple of 4 KiB) from `buf` at `file_offset`, of which
// the first `need` are the caller's (the rest is padding: a read may stop at the end of the file
// once `need` bytes have arrived; a write writes the padding and the request trims it later).
struct Block {
  std::shared_ptr<RequestState> req;
  int64_t file_offset = 0;
  std::byte* buf = nullptr;
  int64_t length = 0;
  int64_t need = 0;
};

// Cuts `req` into blocks of at most `block_size` bytes and sets its block count. A zero-byte
// request yields no blocks (the caller finalizes it at once).
std::vector<Block> split_into_blocks(const std::shared_ptr<RequestState>& req, int64_t block_size);

// Applies one completed transfer of `result` bytes (or -errno) to `b`: returns true when the block
// is finished (success or recorded failure), false when it must be resubmitted for the rest (a
// partial transfer; `b` is advanced). Shared by both backends so they agree on every edge case.
bool apply_result(Block& b, int64_t result);

}  // namespace ds::aio
