#include "aio/aio_engine.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "aio/request.h"
#include "aio/thread_backend.h"
#include "aio/uring_backend.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::aio {

IoHandle AsyncIo::submit_read(const std::string& path, void* buffer, int64_t bytes,
                              int64_t offset) {
  return submit({IoOp::Read, path, static_cast<std::byte*>(buffer), bytes, offset});
}

IoHandle AsyncIo::submit_write(const std::string& path, const void* buffer, int64_t bytes,
                               int64_t offset) {
  // The engine never writes into a write's buffer; the cast only shares the request type.
  return submit({IoOp::Write, path, static_cast<std::byte*>(const_cast<void*>(buffer)), bytes,
                 offset});
}

AioEngine::AioEngine(const AioOptions& options) : options_(options) {
  options_.validate();
  const Backend wanted = resolve_backend(options_.backend);
  if (wanted != Backend::Threads) {
    uring_ = UringBackend::create(options_, &uring_why_not_);
    if (!uring_) {
      if (wanted == Backend::Uring)
        throw NotSupported("aio: the io_uring backend was requested but is unavailable: " +
                           uring_why_not_ + " (use DS_AIO_BACKEND=threads or auto)");
      log::warn("aio: io_uring is unavailable ({}); using the pread/pwrite thread pool, which is "
                "correct but slower (containers often block io_uring in their seccomp profile)",
                uring_why_not_);
    }
  }
  backend_ = uring_ ? Backend::Uring : Backend::Threads;
}

AioEngine::~AioEngine() {
  try {
    wait_all();
  } catch (...) {  // destructors never throw; the caller that cared has waited already
  }
  uring_.reset();
  threads_.reset();
}

BlockExecutor& AioEngine::threads() {
  // Caller holds mu_. Blocking calls in flight stand in for the queue depth.
  if (!threads_) {
    const int64_t n = std::clamp<int64_t>(options_.queue_depth * options_.intra_op_parallelism, 1, 64);
    threads_ = std::make_unique<ThreadBackend>(static_cast<int>(n));
  }
  return *threads_;
}

IoHandle AioEngine::submit(const IoRequest& r) {
  DS_ASSERT(r.bytes >= 0, "aio: negative request length");
  DS_ASSERT(r.bytes == 0 || (r.buffer != nullptr && is_aligned(r.buffer)),
            "aio: the buffer of \"" + r.path + "\" is not 4 KiB-aligned (use ds::aio::AlignedBuffer)");
  DS_ASSERT(r.offset >= 0 && is_aligned(r.offset),
            "aio: offset " + std::to_string(r.offset) + " of \"" + r.path + "\" is not a multiple of 4096");
  OpenedFile file = open_for_io(r.op, r.path, r.offset, r.bytes);
  const bool direct = file.direct;
  std::string why = file.buffered_why;
  auto state = std::make_shared<RequestState>(r.op, r.path, std::move(file), r.buffer, r.bytes, r.offset);
  std::vector<Block> blocks = split_into_blocks(state, options_.block_size);
  std::lock_guard<std::mutex> lk(mu_);
  if (!direct && buffered_why_.empty()) {
    buffered_why_ = why;
    log::warn("aio: {}; using buffered pread/pwrite on the thread pool for such files (correct, but "
              "not direct I/O: point nvme_path at a local SSD for speed)", why);
  }
  const uint64_t id = next_id_++;
  requests_.emplace(id, state);
  if (blocks.empty()) {
    state->set_block_count(1);
    state->block_done();  // zero bytes: nothing to move, finalize now
  } else {
    BlockExecutor& ex = (direct && uring_) ? *uring_ : threads();
    ex.execute(std::move(blocks));
  }
  return IoHandle{id};
}

void AioEngine::wait(IoHandle h) {
  std::shared_ptr<RequestState> state;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = requests_.find(h.id);
    DS_ASSERT(it != requests_.end(), "aio: wait on an unknown or already-waited handle");
    state = std::move(it->second);
    requests_.erase(it);
  }
  state->wait();
}

void AioEngine::wait_all() {
  std::vector<std::shared_ptr<RequestState>> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [id, s] : requests_) all.push_back(std::move(s));
    requests_.clear();
  }
  std::exception_ptr first;
  for (auto& s : all) {
    try {
      s->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

std::string AioEngine::buffered_reason() const {
  std::lock_guard<std::mutex> lk(mu_);
  return buffered_why_;
}

int64_t AioEngine::in_flight() const {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int64_t>(requests_.size());
}

}  // namespace ds::aio
