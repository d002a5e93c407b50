#include "aio/uring_backend.h"

#ifdef DS_HAVE_LIBURING
#include <liburing.h>
#endif

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "aio/io_file.h"

namespace ds::aio {

#ifdef DS_HAVE_LIBURING

bool uring_compiled_in() { return true; }

struct UringBackend::Worker {
  io_uring ring{};
  bool ring_ready = false;  // io_uring_queue_init succeeded (so the destructor must exit it)
  int depth = 1;
  bool overlap = true;
  bool single_submit = false;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Block> incoming;
  bool stop = false;
  std::thread thread;
  std::string broken;  // a ring failure after which every block fails with this text

  ~Worker() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
    if (ring_ready) io_uring_queue_exit(&ring);
  }

  void run();
  void finish(Block& b, int64_t result, std::deque<Block>& pending);
  int submit_all();
};

void UringBackend::Worker::finish(Block& b, int64_t result, std::deque<Block>& pending) {
  if (apply_result(b, result)) {
    auto req = std::move(b.req);
    req->block_done();
  } else {
    pending.push_front(std::move(b));  // partial write: the rest goes first
  }
}

// Submits what is queued in the SQ, retrying the transient errors; returns 0 or -errno.
int UringBackend::Worker::submit_all() {
  while (true) {
    const int r = io_uring_submit(&ring);
    if (r >= 0) return 0;
    if (r != -EINTR && r != -EAGAIN && r != -EBUSY) return r;
    std::this_thread::yield();
  }
}

void UringBackend::Worker::run() {
  std::vector<Block> slots(static_cast<size_t>(depth));  // user_data = slot index
  std::vector<int> free_slots;
  for (int i = depth - 1; i >= 0; --i) free_slots.push_back(i);
  std::deque<Block> pending;
  int inflight = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lk(mu);
      if (pending.empty() && inflight == 0)
        cv.wait(lk, [&] { return stop || !incoming.empty(); });
      if (stop && incoming.empty() && pending.empty() && inflight == 0) return;
      while (!incoming.empty()) {
        pending.push_back(std::move(incoming.front()));
        incoming.pop_front();
      }
    }
    if (!broken.empty()) {  // the ring is unusable: fail everything that is not in flight
      for (auto& b : pending) {
        b.req->fail(io_error_text(to_string(b.req->op()), b.req->path(), b.file_offset, b.length,
                                  EIO) + " [" + broken + "]");
        auto req = std::move(b.req);
        req->block_done();
      }
      pending.clear();
      if (inflight == 0) continue;
    }
    // Fill the ring up to the queue depth.
    int prepared = 0;
    while (broken.empty() && inflight < depth && !pending.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (sqe == nullptr) break;
      const int idx = free_slots.back();
      free_slots.pop_back();
      Block& b = slots[static_cast<size_t>(idx)];
      b = std::move(pending.front());
      pending.pop_front();
      if (b.req->op() == IoOp::Read)
        io_uring_prep_read(sqe, b.req->fd(), b.buf, static_cast<unsigned>(b.length),
                           static_cast<uint64_t>(b.file_offset));
      else
        io_uring_prep_write(sqe, b.req->fd(), b.buf, static_cast<unsigned>(b.length),
                            static_cast<uint64_t>(b.file_offset));
      io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(idx));
      ++inflight;
      ++prepared;
      if (single_submit) {
        if (int r = submit_all(); r < 0) broken = "io_uring_submit: " + errno_text(-r);
      }
    }
    if (!single_submit && prepared > 0) {
      if (int r = submit_all(); r < 0) broken = "io_uring_submit: " + errno_text(-r);
    }
    if (!broken.empty()) {
      // Nothing more will complete reliably: fail what we think is in flight and stop using the
      // ring (its entries are never reused, so a late completion cannot touch a new block).
      for (int i = 0; i < depth; ++i) {
        Block& b = slots[static_cast<size_t>(i)];
        if (b.req) finish(b, -EIO, pending);
      }
      inflight = 0;
      continue;
    }
    // Reap: at least one completion (overlap) or all of them (sequential batches).
    while (inflight > 0) {
      io_uring_cqe* cqe = nullptr;
      int r = io_uring_wait_cqe(&ring, &cqe);
      if (r == -EINTR) continue;
      if (r < 0) {
        broken = "io_uring_wait_cqe: " + errno_text(-r);
        break;
      }
      unsigned head = 0, seen = 0;
      io_uring_for_each_cqe(&ring, head, cqe) {
        const int idx = static_cast<int>(io_uring_cqe_get_data64(cqe));
        Block b = std::move(slots[static_cast<size_t>(idx)]);
        slots[static_cast<size_t>(idx)] = Block{};
        free_slots.push_back(idx);
        --inflight;
        finish(b, cqe->res, pending);
        ++seen;
      }
      io_uring_cq_advance(&ring, seen);
      if (overlap) break;
    }
  }
}

std::unique_ptr<UringBackend> UringBackend::create(const AioOptions& o, std::string* why_not) {
  std::unique_ptr<UringBackend> be(new UringBackend());
  for (int64_t t = 0; t < o.intra_op_parallelism; ++t) {
    auto w = std::make_unique<Worker>();
    w->depth = static_cast<int>(o.queue_depth);
    w->overlap = o.overlap_events;
    w->single_submit = o.single_submit;
    const int r = io_uring_queue_init(static_cast<unsigned>(o.queue_depth), &w->ring, 0);
    if (r < 0) {
      if (why_not) *why_not = "io_uring_queue_init failed: " + errno_text(-r);
      return nullptr;
    }
    w->ring_ready = true;
    be->workers_.push_back(std::move(w));
  }
  for (auto& w : be->workers_) {
    Worker* wp = w.get();
    wp->thread = std::thread([wp] { wp->run(); });
  }
  return be;
}

UringBackend::~UringBackend() = default;

void UringBackend::execute(std::vector<Block> blocks) {
  const size_t n = blocks.size(), t = workers_.size();
  const size_t per = (n + t - 1) / t;
  for (size_t w = 0; w < t && w * per < n; ++w) {
    Worker& wk = *workers_[w];
    {
      std::lock_guard<std::mutex> lk(wk.mu);
      for (size_t i = w * per; i < std::min(n, (w + 1) * per); ++i)
        wk.incoming.push_back(std::move(blocks[i]));
    }
    wk.cv.notify_one();
  }
}

#else  // built without liburing: only the thread pool exists

bool uring_compiled_in() { return false; }
struct UringBackend::Worker {};
std::unique_ptr<UringBackend> UringBackend::create(const AioOptions&, std::string* why_not) {
  if (why_not) *why_not = "this build has no io_uring support (liburing-dev was not found)";
  return nullptr;
}
UringBackend::~UringBackend() = default;
void UringBackend::execute(std::vector<Block>) {}

#endif

}  // namespace ds::aio
