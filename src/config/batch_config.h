// The batch-size triple (DeepSpeed's _set_batch_related_parameters / _batch_assertion, reference §1.2):
// train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * world_size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ds {

// The largest train_batch_size, micro batch or accumulation count accepted: 2^31 - 1 (see batch.cpp).
inline constexpr int64_t kMaxBatchSize = 2147483647;

// "<value> is above the limit 2147483647 (2^31 - 1) for batch sizes: ..." (why the limit is there).
std::string batch_size_limit_message(const std::string& value);

struct BatchTriple {
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
};

// Derives the missing members from the given ones for `world_size` data-parallel ranks, with
// Python's floor division, then asserts positivity and T == M * G * W. Throws ds::ConfigError with
// DeepSpeed's exact message (empty path: the message names the keys itself), or naming the key
// whose value (given or derived) is above kMaxBatchSize.
BatchTriple resolve_batch_triple(std::optional<int64_t> train_batch_size,
                                 std::optional<int64_t> train_micro_batch_size_per_gpu,
                                 std::optional<int64_t> gradient_accumulation_steps, int world_size);

}  // namespace ds
