// ds::comm::Work: the handle of one collective started with an *_async call. wait() blocks until
// the collective finished on this rank and rethrows its error (a ds::CommError); is_completed()
// polls. RAII: destroying a Work that has not finished waits for it (its buffers are still in use),
// and a destructor never throws (an unobserved error is logged instead).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>

namespace ds::comm {

namespace detail {
// Completion state shared by the Work handle and the backend that runs the collective.
class WorkState {
 public:
  void complete(std::exception_ptr error = nullptr) noexcept;
  void wait() const noexcept;  // blocks until complete() was called
  bool done() const noexcept;
  std::exception_ptr error() const noexcept;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};
}  // namespace detail

class Work {
 public:
  Work() noexcept = default;  // an already completed no-op
  Work(std::shared_ptr<detail::WorkState> state, uint64_t seq) noexcept;
  Work(Work&& other) noexcept;
  Work& operator=(Work&& other) noexcept;  // finishes (waits for) the handle it replaces
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work();

  // Blocks until done; throws the collective's error (ds::CommError) if it failed.
  void wait();
  bool is_completed() const noexcept;
  uint64_t seq() const noexcept { return seq_; }  // the collective's sequence number (0: none)

  // A finished Work, failed when `error` is set (backends that run collectives inline).
  static Work completed(uint64_t seq, std::exception_ptr error = nullptr);

 private:
  void finish_quietly() noexcept;

  std::shared_ptr<detail::WorkState> state_;
  uint64_t seq_ = 0;
  bool observed_ = false;  // wait() reported the outcome to the caller
};

}  // namespace ds::comm
