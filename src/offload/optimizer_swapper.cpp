#include "offload/optimizer_swapper.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>

#include "aio/nvme_path.h"
#include "util/error.h"

namespace ds::offload {
namespace {

using Clock = std::chrono::steady_clock;

double swap_seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

SwapLayout SwapLayout::with_states(std::vector<int64_t> sub_group_numel, int num_states) {
  SwapLayout l;
  l.sub_group_numel = std::move(sub_group_numel);
  for (int j = 0; j < num_states; ++j) l.state_names.push_back("state" + std::to_string(j));
  return l;
}

SwapperOptions swapper_options(const OffloadOptimizerConfig& c, int zero_stage, int rank,
                               SwapLayout layout) {
  SwapperOptions o;
  if (!c.nvme_path)
    throw ConfigError("zero_optimization.offload_optimizer.nvme_path",
                      "is required when device is \"nvme\" (a writable directory on a local SSD)");
  o.nvme_path = *c.nvme_path;
  o.zero_stage = zero_stage;
  o.rank = rank;
  o.buffer_count = c.buffer_count;
  o.pipeline_read = c.pipeline_read;
  o.pipeline_write = c.pipeline_write;
  o.layout = std::move(layout);
  return o;
}

OptimizerSwapper::OptimizerSwapper(aio::AsyncIo& io, SwapperOptions options)
    : io_(io),
      opts_(std::move(options)),
      dir_(opts_.nvme_path, opts_.zero_stage, opts_.rank, opts_.config_key + ".nvme_path") {
  const int S = num_states();
  DS_ASSERT(S >= 1, "swapper: at least one state per element");
  DS_ASSERT(std::all_of(opts_.layout.sub_group_numel.begin(), opts_.layout.sub_group_numel.end(),
                        [](int64_t n) { return n >= 0; }),
            "swapper: negative sub-group size");
  const int groups = sub_groups_in_flight();
  const int64_t needed = static_cast<int64_t>(groups) * S;
  if (opts_.buffer_count < needed) {
    const char* mode = opts_.pipeline_read && opts_.pipeline_write ? "pipeline_read and pipeline_write"
                       : opts_.pipeline_read                       ? "pipeline_read"
                       : opts_.pipeline_write                      ? "pipeline_write"
                                                                   : "swapping without pipelining";
    throw ConfigError(opts_.config_key + ".buffer_count",
                      std::to_string(opts_.buffer_count) + " swap buffers are too few: " + mode +
                          " keeps " + std::to_string(groups) + " sub-group(s) of " +
                          std::to_string(S) + " optimizer states in flight, " +
                          std::to_string(needed) + " buffers (raise buffer_count to " +
                          std::to_string(needed) + " or turn pipelining off)");
  }
  // Disk: every state of every sub-group, as files of whole 4 KiB blocks.
  uint64_t disk = 0;
  for (int64_t n : opts_.layout.sub_group_numel)
    disk += static_cast<uint64_t>(aio::align_up(n * 4)) * static_cast<uint64_t>(S);
  aio::check_free_space(dir_.path(), disk, opts_.config_key + ".nvme_path");

  int64_t largest = 0;
  for (int64_t n : opts_.layout.sub_group_numel) largest = std::max(largest, n);
  buffers_.reserve(static_cast<size_t>(needed));
  for (int64_t i = 0; i < needed; ++i) buffers_.emplace_back(std::max<int64_t>(largest * 4, 1));
  slots_.resize(static_cast<size_t>(groups));
  written_.assign(static_cast<size_t>(num_sub_groups()), false);
}

OptimizerSwapper::~OptimizerSwapper() { drain(); }

int OptimizerSwapper::sub_groups_in_flight() const {
  return 1 + (opts_.pipeline_read ? 1 : 0) + (opts_.pipeline_write ? 1 : 0);
}

std::string OptimizerSwapper::file_path(int64_t k, int state) const {
  return dir_.file(k, opts_.layout.state_names[static_cast<size_t>(state)]);
}

int64_t OptimizerSwapper::buffer_bytes() const {
  return buffers_.empty() ? 0 : buffers_.front().capacity();
}

float* OptimizerSwapper::state_ptr(const Slot& s, int state) {
  const size_t slot = static_cast<size_t>(&s - slots_.data());
  return buffers_[slot * static_cast<size_t>(num_states()) + static_cast<size_t>(state)].as<float>();
}

void OptimizerSwapper::note_live() {
  int64_t live = 0;
  for (const Slot& s : slots_) live += s.state == SlotState::Free ? 0 : num_states();
  stats_.max_live_buffers = std::max(stats_.max_live_buffers, live);
}

OptimizerSwapper::Slot& OptimizerSwapper::acquire_slot() {
  for (Slot& s : slots_)
    if (s.state == SlotState::Free) return s;
  // None free: the oldest write-back must finish first (its update is long done).
  Slot* oldest = nullptr;
  for (Slot& s : slots_)
    if (s.state == SlotState::Writing && (!oldest || s.write_seq < oldest->write_seq)) oldest = &s;
  DS_ASSERT(oldest != nullptr, "swapper: no swap buffer can be freed");
  wait_slot(*oldest);
  return *oldest;
}

void OptimizerSwapper::issue(Slot& s, int64_t k, aio::IoOp op) {
  const int64_t bytes = sub_group_numel(k) * 4;
  s.sub_group = k;
  s.state = op == aio::IoOp::Read ? SlotState::Reading : SlotState::Writing;
  if (op == aio::IoOp::Write) s.write_seq = ++write_seq_;
  note_live();
  for (int j = 0; j < num_states(); ++j) {
    aio::IoRequest r{op, file_path(k, j), reinterpret_cast<std::byte*>(state_ptr(s, j)), bytes, 0};
    s.pending.push_back(io_.submit(r));
  }
  if (op == aio::IoOp::Read) {
    stats_.bytes_read += bytes * num_states();
    ++stats_.sub_group_reads;
  } else {
    stats_.bytes_written += bytes * num_states();
    ++stats_.sub_group_writes;
  }
}

void OptimizerSwapper::wait_slot(Slot& s) {
  const auto t0 = Clock::now();
  std::exception_ptr first;
  for (aio::IoHandle h : s.pending) {  // wait every handle, even after a failure
    try {
      io_.wait(h);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  s.pending.clear();
  (s.state == SlotState::Reading ? stats_.read_wait_s : stats_.write_wait_s) += swap_seconds_since(t0);
  // A finished read hands the buffers to the update; a finished write frees them.
  s.state = s.state == SlotState::Reading ? SlotState::Updating : SlotState::Free;
  if (first) {
    s.state = SlotState::Free;
    std::rethrow_exception(first);
  }
}

void OptimizerSwapper::drain() noexcept {
  for (Slot& s : slots_) {
    for (aio::IoHandle h : s.pending) {
      try {
        io_.wait(h);
      } catch (...) {  // the first error was already reported to the caller
      }
    }
    s.pending.clear();
    s.state = SlotState::Free;
  }
}

void OptimizerSwapper::write_sub_group(int64_t k, std::span<const float* const> states) {
  DS_ASSERT(k >= 0 && k < num_sub_groups(), "swapper: sub-group out of range");
  DS_ASSERT(static_cast<int>(states.size()) == num_states(), "swapper: wrong number of states");
  Slot& s = acquire_slot();
  const size_t bytes = static_cast<size_t>(sub_group_numel(k)) * 4;
  for (int j = 0; j < num_states(); ++j) {
    if (states[static_cast<size_t>(j)])
      std::memcpy(state_ptr(s, j), states[static_cast<size_t>(j)], bytes);
    else
      std::memset(state_ptr(s, j), 0, bytes);
  }
  try {
    issue(s, k, aio::IoOp::Write);
    wait_slot(s);
  } catch (...) {
    drain();
    throw;
  }
  written_[static_cast<size_t>(k)] = true;
}

void OptimizerSwapper::read_sub_group(int64_t k, std::span<float* const> states) {
  DS_ASSERT(k >= 0 && k < num_sub_groups(), "swapper: sub-group out of range");
  DS_ASSERT(static_cast<int>(states.size()) == num_states(), "swapper: wrong number of states");
  DS_CHECK(written_[static_cast<size_t>(k)], Error,
           "swapper: sub-group " + std::to_string(k) + " has no swap file yet (write it first)");
  Slot& s = acquire_slot();
  try {
    issue(s, k, aio::IoOp::Read);
    wait_slot(s);
  } catch (...) {
    drain();
    throw;
  }
  const size_t bytes = static_cast<size_t>(sub_group_numel(k)) * 4;
  for (int j = 0; j < num_states(); ++j)
    std::memcpy(states[static_cast<size_t>(j)], state_ptr(s, j), bytes);
  s.state = SlotState::Free;
}

void OptimizerSwapper::for_each_sub_group(const UpdateFn& update) {
  const int64_t n = num_sub_groups();
  for (int64_t k = 0; k < n; ++k)
    DS_CHECK(written_[static_cast<size_t>(k)], Error,
             "swapper: sub-group " + std::to_string(k) + " has no swap file yet (write it first)");
  if (n == 0) return;
  const int S = num_states();
  std::vector<float*> ptrs(static_cast<size_t>(S));
  try {
    Slot* cur = &acquire_slot();
    issue(*cur, 0, aio::IoOp::Read);
    for (int64_t k = 0; k < n; ++k) {
      wait_slot(*cur);  // read k complete (it was prefetched when pipelining)
      Slot* next = nullptr;
      if (opts_.pipeline_read && k + 1 < n) {
        next = &acquire_slot();
        issue(*next, k + 1, aio::IoOp::Read);  // in flight during update k
      }
      for (int j = 0; j < S; ++j) ptrs[static_cast<size_t>(j)] = state_ptr(*cur, j);
      update(k, std::span<float* const>(ptrs));
      issue(*cur, k, aio::IoOp::Write);
      if (!opts_.pipeline_write) wait_slot(*cur);  // else waited lazily, when its slot is needed
      if (!opts_.pipeline_read && k + 1 < n) {
        next = &acquire_slot();
        issue(*next, k + 1, aio::IoOp::Read);
      }
      cur = next;
    }
    // The last write-backs: the next pass (or a checkpoint) reads these files.
    for (Slot& s : slots_)
      if (s.state == SlotState::Writing) wait_slot(s);
  } catch (...) {
    drain();
    throw;
  }
}

}  // namespace ds::offload
