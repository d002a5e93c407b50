// Per-tier byte accounting: every long-lived buffer the engine allocates is recorded here by tier
// (device / cpu / nvme) and kind (params, grads, master, optimizer state, buffers), so the engine
// can print where its memory went and tests can hold the counts to the ZeRO formulas (DESIGN §5).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ds {

enum class Tier { Device, Cpu, Nvme };
enum class MemKind { Params, Grads, Master, OptimizerState, Buffers };

inline constexpr int kNumTiers = 3;
inline constexpr int kNumMemKinds = 5;

const char* to_string(Tier t);
const char* to_string(MemKind k);

class MemoryLedger {
 public:
  void add(Tier tier, MemKind kind, std::uint64_t bytes);
  void release(Tier tier, MemKind kind, std::uint64_t bytes);  // DS_ASSERTs it never goes negative

  std::uint64_t bytes(Tier tier, MemKind kind) const;
  std::uint64_t tier_total(Tier tier) const;
  std::uint64_t kind_total(MemKind kind) const;
  std::uint64_t total() const;

  // A fixed-width table: one row per tier, one column per kind, plus totals.
  std::string table() const;

 private:
  std::array<std::array<std::uint64_t, kNumMemKinds>, kNumTiers> bytes_{};
};

}  // namespace ds
