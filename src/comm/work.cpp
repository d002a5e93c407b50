// Work handles and their shared completion state.
#include "comm/work.h"

#include <utility>

#include "util/logging.h"

namespace ds::comm {
namespace detail {

void WorkState::complete(std::exception_ptr error) noexcept {
  {
    std::lock_guard lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

void WorkState::wait() const noexcept {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

bool WorkState::done() const noexcept {
  std::lock_guard lock(mu_);
  return done_;
}

std::exception_ptr WorkState::error() const noexcept {
  std::lock_guard lock(mu_);
  return error_;
}

}  // namespace detail

Work::Work(std::shared_ptr<detail::WorkState> state, uint64_t seq) noexcept
    : state_(std::move(state)), seq_(seq) {}

Work::Work(Work&& other) noexcept
    : state_(std::move(other.state_)), seq_(other.seq_), observed_(other.observed_) {
  other.seq_ = 0;
}

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    finish_quietly();
    state_ = std::move(other.state_);
    seq_ = other.seq_;
    observed_ = other.observed_;
    other.seq_ = 0;
  }
  return *this;
}

Work::~Work() { finish_quietly(); }

void Work::finish_quietly() noexcept {
  if (!state_) return;
  state_->wait();
  if (!observed_) {
    if (auto err = state_->error()) {
      try {
        try {
          std::rethrow_exception(err);
        } catch (const std::exception& e) {
          ds::log::error("comm: collective #{} failed and its Work was dropped without wait(): {}",
                         seq_, e.what());
        }
      } catch (...) {  // a non-std error, or logging itself failed: destructors never throw
      }
    }
  }
  state_.reset();
}

void Work::wait() {
  if (!state_) return;
  state_->wait();
  observed_ = true;
  if (auto err = state_->error()) std::rethrow_exception(err);
}

bool Work::is_completed() const noexcept { return !state_ || state_->done(); }

Work Work::completed(uint64_t seq, std::exception_ptr error) {
  auto state = std::make_shared<detail::WorkState>();
  state->complete(std::move(error));
  return Work(std::move(state), seq);
}

}  // namespace ds::comm
