// The ring of the last collectives (see collective_log.h).
#include "comm/collective_log.h"

#include <algorithm>
#include <cstdio>

namespace ds::comm {

std::string_view to_string(CollectiveState s) noexcept {
  switch (s) {
    case CollectiveState::Queued: return "queued";
    case CollectiveState::Running: return "running";
    case CollectiveState::Done: return "done";
    case CollectiveState::Failed: return "FAILED";
  }
  return "?";
}

std::string format_record(const CollectiveRecord& r) {
  // Appended piecewise: GCC 12 warns (-Wrestrict, a false positive) on "literal" + std::string.
  std::string s("#");
  s.append(std::to_string(r.seq)).append(" ").append(to_string(r.op));
  if (r.op == OpKind::AllReduce || r.op == OpKind::ReduceScatter) s.append(" ").append(to_string(r.reduce));
  if (r.op != OpKind::Barrier && r.op != OpKind::Split) s.append(" ").append(format_bytes(r.bytes)).append(" ").append(to_string(r.type));
  if (!r.tag.empty()) s.append(" tag=").append(r.tag);
  char t[64];
  std::snprintf(t, sizeof t, " %s %.3f s", std::string(to_string(r.state)).c_str(), r.duration_s);
  return s.append(t);
}

int64_t wire_bytes(OpKind op, int64_t bytes, int world) noexcept {
  if (world <= 1) return 0;
  const int64_t p = world;
  switch (op) {
    case OpKind::AllReduce: return 2 * (p - 1) * bytes / p;
    case OpKind::ReduceScatter:
    case OpKind::AllGather:
    case OpKind::AllToAll:
    case OpKind::Reduce: return (p - 1) * bytes / p;  // reduce: every rank but the root sends once
    case OpKind::Broadcast: return bytes;
    case OpKind::Barrier:
    case OpKind::Split: return 0;
  }
  return 0;
}

CollectiveLog::CollectiveLog() : origin_(Clock::now()) {}

double CollectiveLog::since_origin(Clock::time_point t) const {
  return std::chrono::duration<double>(t - origin_).count();
}

uint64_t CollectiveLog::begin(OpKind op, int64_t bytes, ElemType type, ReduceOp reduce,
                              std::string_view tag, int64_t wire) {
  std::lock_guard lock(mu_);
  const uint64_t seq = next_seq_++;
  auto it = std::find_if(totals_.begin(), totals_.end(), [&](const ByteTotals& t) { return t.op == op && t.tag == tag; });
  if (it == totals_.end()) it = totals_.insert(totals_.end(), ByteTotals{op, std::string(tag)});
  it->calls += 1;
  it->bytes += bytes;
  it->wire_bytes += wire;
  Slot& slot = ring_[seq % kCapacity];
  const auto now = Clock::now();
  slot.rec = CollectiveRecord{seq, op, bytes, type, reduce, std::string(tag), CollectiveState::Queued,
                              since_origin(now), 0.0};
  slot.started = now;
  return seq;
}

CollectiveLog::Slot* CollectiveLog::find(uint64_t seq) {
  Slot& slot = ring_[seq % kCapacity];
  return slot.rec.seq == seq ? &slot : nullptr;
}

void CollectiveLog::mark_running(uint64_t seq) {
  std::lock_guard lock(mu_);
  if (Slot* s = find(seq)) {
    s->rec.state = CollectiveState::Running;
    s->started = Clock::now();
  }
}

void CollectiveLog::finish(uint64_t seq, bool ok) {
  std::lock_guard lock(mu_);
  if (Slot* s = find(seq)) {
    s->rec.state = ok ? CollectiveState::Done : CollectiveState::Failed;
    s->rec.duration_s = std::chrono::duration<double>(Clock::now() - s->started).count();
  }
}

std::vector<CollectiveRecord> CollectiveLog::last() const {
  std::lock_guard lock(mu_);
  std::vector<CollectiveRecord> out;
  const uint64_t first = next_seq_ > kCapacity ? next_seq_ - kCapacity : 1;
  const auto now = Clock::now();
  for (uint64_t seq = first; seq < next_seq_; ++seq) {
    const Slot& s = ring_[seq % kCapacity];
    CollectiveRecord r = s.rec;
    if (r.state == CollectiveState::Running)
      r.duration_s = std::chrono::duration<double>(now - s.started).count();
    out.push_back(std::move(r));
  }
  return out;
}

std::string CollectiveLog::format() const {
  std::string out;
  for (const auto& r : last()) out += "  " + format_record(r) + "\n";
  return out.empty() ? "  (no collectives yet)\n" : out;
}

uint64_t CollectiveLog::last_seq() const {
  std::lock_guard lock(mu_);
  return next_seq_ - 1;
}

std::vector<ByteTotals> CollectiveLog::totals() const {
  std::lock_guard lock(mu_);
  return totals_;
}

int64_t CollectiveLog::sum_wire_bytes(std::string_view tag_prefix) const {
  std::lock_guard lock(mu_);
  int64_t sum = 0;
  for (const auto& t : totals_)
    if (std::string_view(t.tag).substr(0, tag_prefix.size()) == tag_prefix) sum += t.wire_bytes;
  return sum;
}

}  // namespace ds::comm
