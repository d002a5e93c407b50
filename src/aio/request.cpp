#include "aio/request.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "aio/aligned_buffer.h"
#include "util/error.h"

namespace ds::aio {

RequestState::RequestState(IoOp op, std::string path, OpenedFile file, std::byte* buffer,
                           int64_t bytes, int64_t offset)
    : op_(op), path_(std::move(path)), file_(std::move(file)), buffer_(buffer), bytes_(bytes),
      offset_(offset) {}

void RequestState::fail(std::string message) {
  std::lock_guard<std::mutex> lk(mu_);
  if (error_.empty()) error_ = std::move(message);
}

void RequestState::block_done() noexcept {
  if (blocks_left_.fetch_sub(1) == 1) finalize();
}

void RequestState::finalize() noexcept {
  std::string err;
  {
    std::lock_guard<std::mutex> lk(mu_);
    err = error_;
  }
  // A write whose length is not a multiple of 4 KiB wrote a padded last block. If that padding is
  // now the end of the file, cut it off so the file's size is the logical size (a later read of
  // the same length then works, and a read past it is a short read as it should be).
  if (err.empty() && op_ == IoOp::Write && !is_aligned(bytes_)) {
    const int64_t end = offset_ + bytes_;
    struct stat st {};
    if (::fstat(fd(), &st) != 0) {
      err = io_error_text("write (fstat)", path_, offset_, bytes_, errno);
    } else if (st.st_size > end && st.st_size <= offset_ + align_up(bytes_) &&
               ::ftruncate(fd(), end) != 0) {
      err = io_error_text("write (ftruncate)", path_, offset_, bytes_, errno);
    }
  }
  file_.fd.reset();
  std::lock_guard<std::mutex> lk(mu_);
  if (error_.empty()) error_ = std::move(err);
  done_ = true;
  cv_.notify_all();
}

bool RequestState::done() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_;
}

void RequestState::wait() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return done_; });
  if (!error_.empty()) throw IoError(error_);
}

std::vector<Block> split_into_blocks(const std::shared_ptr<RequestState>& req, int64_t block_size) {
  std::vector<Block> blocks;
  const int64_t n = req->bytes();
  blocks.reserve(static_cast<size_t>((n + block_size - 1) / block_size));
  for (int64_t pos = 0; pos < n; pos += block_size) {
    Block b;
    b.req = req;
    b.file_offset = req->offset() + pos;
    b.buf = req->buffer() + pos;
    b.need = std::min(block_size, n - pos);
    b.length = align_up(b.need);
    blocks.push_back(std::move(b));
  }
  req->set_block_count(static_cast<int64_t>(blocks.size()));
  return blocks;
}

bool apply_result(Block& b, int64_t result) {
  RequestState& r = *b.req;
  const char* op = to_string(r.op());
  if (result < 0) {
    r.fail(io_error_text(op, r.path(), b.file_offset, b.length, static_cast<int>(-result)));
    return true;
  }
  if (result >= b.need && (r.op() == IoOp::Read || result >= b.length)) return true;
  if (r.op() == IoOp::Read) {
    // A regular file returns less than asked only at its end: the file is shorter than the
    // request. Blocks run concurrently, so report the file's size, not this block's position.
    struct stat st {};
    const int64_t end = ::fstat(r.fd(), &st) == 0 ? static_cast<int64_t>(st.st_size)
                                                  : b.file_offset + result;
    r.fail("aio read \"" + r.path() + "\" (offset " + std::to_string(r.offset()) + ", " +
           std::to_string(r.bytes()) + " bytes): short read: the file ends at byte " +
           std::to_string(end) + " (it was truncated or never fully written)");
    return true;
  }
  if (result == 0) {
    r.fail(io_error_text(op, r.path(), b.file_offset, b.length, ENOSPC));
    return true;
  }
  // Partial write (a size limit was reached mid-block): continue after it; the retry reports why.
  b.file_offset += result;
  b.buf += result;
  b.length -= result;
  b.need = std::max<int64_t>(0, b.need - result);
  return false;
}

}  // namespace ds::aio
