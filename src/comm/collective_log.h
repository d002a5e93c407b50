// CollectiveLog: every collective a communicator runs gets a sequence number (1, 2, ...) and a
// record (op, bytes, element type, reduce op, caller tag, state, timing). The log keeps the last
// kCapacity records; the watchdog prints them when a collective hangs, and tests read them.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "comm/types.h"

namespace ds::comm {

enum class CollectiveState : uint8_t { Queued, Running, Done, Failed };
std::string_view to_string(CollectiveState s) noexcept;

struct CollectiveRecord {
  uint64_t seq = 0;  // 1 for a communicator's first collective
  OpKind op = OpKind::Barrier;
  int64_t bytes = 0;  // payload on this rank: the full buffer (all_gather: the gathered output)
  ElemType type = ElemType::Fp32;
  ReduceOp reduce = ReduceOp::Sum;  // meaningful for all_reduce / reduce_scatter
  std::string tag;                  // the caller's label ("grad_bucket_3"), may be empty
  CollectiveState state = CollectiveState::Queued;
  double queued_s = 0;   // seconds since the log was created
  double duration_s = 0; // running time so far (Running) or in total (Done / Failed)
};

// Running byte counts of one (op, tag) pair since the log was created. wire_bytes
// is what this rank sends under the bandwidth-optimal algorithm for world size p (the nccl-tests
// "bus bytes" model): all_reduce 2(p-1)/p of the buffer, reduce_scatter / all_gather / all_to_all
// (p-1)/p of the full buffer, broadcast the buffer, nothing at world size 1. Compression is compared
// on it: it counts what crosses the link, whatever the collective.
struct ByteTotals {
  OpKind op = OpKind::Barrier;
  std::string tag;
  int64_t calls = 0;
  int64_t bytes = 0;       // payload, as CollectiveRecord::bytes
  int64_t wire_bytes = 0;
};

// The wire bytes of one collective of `bytes` payload over `world` ranks (see ByteTotals).
int64_t wire_bytes(OpKind op, int64_t bytes, int world) noexcept;

// "#12 all_reduce sum 64 MiB fp32 tag=grads done 0.041 s"
std::string format_record(const CollectiveRecord& r);

class CollectiveLog {
 public:
  static constexpr std::size_t kCapacity = 16;

  CollectiveLog();

  // Records a new collective (state Queued) and returns its sequence number.
  // `wire` (see ByteTotals) is added to the totals of (op, tag).
  uint64_t begin(OpKind op, int64_t bytes, ElemType type, ReduceOp reduce, std::string_view tag, int64_t wire = 0);
  void mark_running(uint64_t seq);
  void finish(uint64_t seq, bool ok);

  // The last (up to kCapacity) records, oldest first.
  std::vector<CollectiveRecord> last() const;
  // One line per record, oldest first (what the watchdog prints).
  std::string format() const;
  uint64_t last_seq() const;  // 0 before the first collective

  // Byte totals per (op, tag), in order of first use; sum_wire_bytes adds those whose tag starts with
  // `tag_prefix` (all for "").
  std::vector<ByteTotals> totals() const;
  int64_t sum_wire_bytes(std::string_view tag_prefix = {}) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    CollectiveRecord rec;
    Clock::time_point started;
  };
  Slot* find(uint64_t seq);  // nullptr once the record left the ring
  double since_origin(Clock::time_point t) const;

  mutable std::mutex mu_;
  Clock::time_point origin_;
  std::array<Slot, kCapacity> ring_{};
  uint64_t next_seq_ = 1;
  std::vector<ByteTotals> totals_;  // few distinct tags: a linear search is the cheap map
};

}  // namespace ds::comm
