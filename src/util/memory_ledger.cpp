#include "util/memory_ledger.h"

#include <fmt/format.h>

#include "util/error.h"
#include "util/system_info.h"

namespace ds {

const char* to_string(Tier t) {
  switch (t) {
    case Tier::Device: return "device";
    case Tier::Cpu: return "cpu";
    case Tier::Nvme: return "nvme";
  }
  return "?";
}

const char* to_string(MemKind k) {
  switch (k) {
    case MemKind::Params: return "params";
    case MemKind::Grads: return "grads";
    case MemKind::Master: return "master";
    case MemKind::OptimizerState: return "optim_state";
    case MemKind::Buffers: return "buffers";
  }
  return "?";
}

void MemoryLedger::add(Tier tier, MemKind kind, std::uint64_t n) {
  bytes_[static_cast<int>(tier)][static_cast<int>(kind)] += n;
}

void MemoryLedger::release(Tier tier, MemKind kind, std::uint64_t n) {
  auto& slot = bytes_[static_cast<int>(tier)][static_cast<int>(kind)];
  DS_ASSERT(slot >= n, fmt::format("releasing {} bytes of {}/{} but only {} recorded", n,
                                   to_string(tier), to_string(kind), slot));
  slot -= n;
}

std::uint64_t MemoryLedger::bytes(Tier tier, MemKind kind) const {
  return bytes_[static_cast<int>(tier)][static_cast<int>(kind)];
}

std::uint64_t MemoryLedger::tier_total(Tier tier) const {
  std::uint64_t s = 0;
  for (auto b : bytes_[static_cast<int>(tier)]) s += b;
  return s;
}

std::uint64_t MemoryLedger::kind_total(MemKind kind) const {
  std::uint64_t s = 0;
  for (const auto& row : bytes_) s += row[static_cast<int>(kind)];
  return s;
}

std::uint64_t MemoryLedger::total() const {
  std::uint64_t s = 0;
  for (int t = 0; t < kNumTiers; ++t) s += tier_total(static_cast<Tier>(t));
  return s;
}

std::string MemoryLedger::table() const {
  std::string out = fmt::format("{:<8}", "tier");
  for (int k = 0; k < kNumMemKinds; ++k) out += fmt::format("{:>13}", to_string(static_cast<MemKind>(k)));
  out += fmt::format("{:>13}\n", "total");
  for (int t = 0; t < kNumTiers; ++t) {
    auto tier = static_cast<Tier>(t);
    out += fmt::format("{:<8}", to_string(tier));
    for (int k = 0; k < kNumMemKinds; ++k)
      out += fmt::format("{:>13}", format_bytes(bytes(tier, static_cast<MemKind>(k))));
    out += fmt::format("{:>13}\n", format_bytes(tier_total(tier)));
  }
  return out;
}

}  // namespace ds
