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

// The parallel sizes that divide the world before the triple is resolved: DeepSpeedConfig takes
// its world_size from the mpu's data-parallel world (world / (pipe x tensor x sequence)), or
// world / sequence_parallel_size without one. Each size is >= 1 here (autotp_size 0 = off = 1,
// pipeline.stages "auto" = 1).
struct ParallelSizes {
  int pipeline_stages = 1;         // pipeline.stages
  int autotp_size = 1;             // tensor_parallel.autotp_size
  int sequence_parallel_size = 1;  // sequence_parallel_size
  // Not a size, but read with pipeline.stages from the same section: the PipelineEngine's default
  // for PipelineModule's activation_checkpoint_interval (0 = off), as DeepSpeed's engine applies it.
  int pipeline_activation_checkpoint_interval = 0;
  // tensor_parallel.vocab_parallel (deepspeed.cpp's own key, DeepSpeed's AutoTP has none): the token
  // embedding and the tied LM head split by rows over the tensor-parallel group, with a parallel loss.
  bool vocab_parallel = false;
  // tensor_parallel.tp_overlap_comm: column-parallel layers overlap their backward all-reduce with the
  // weight gradient (DeepSpeed's TPTrainingConfig key; default false).
  bool tp_overlap_comm = false;
};

// The world the triple is resolved for: `size` data-parallel ranks out of `world`.
struct DataParallelWorld {
  int world = 1;
  int size = 1;  // world / (pipeline_stages x autotp_size x sequence_parallel_size)
  ParallelSizes sizes;
  bool trivial() const noexcept { return size == world; }
  // "world 8", or "data-parallel world 4" when a size divides it.
  std::string term() const;
  // "" when trivial, else "data-parallel world 4 = world 8 / (sequence_parallel_size 2)".
  std::string derivation() const;
};

// Divides `world` by the sizes. Throws ds::ConfigError naming the key when a size is below 1 or
// does not divide what is left ("sequence_parallel_size: world 6 is not divisible by ...").
DataParallelWorld resolve_data_parallel_world(int world, const ParallelSizes& sizes);

struct BatchTriple {
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
};

// Derives the missing members from the given ones for `world.size` data-parallel ranks, with
// Python's floor division, then asserts positivity and T == M * G * W. Throws ds::ConfigError
// whose message starts with DeepSpeed's exact text (empty path: the message names the keys
// itself) and goes on, in parentheses, with the keys, the world and the arithmetic that produced
// the value ("Micro batch size per gpu: 0 has to be greater than 0 (train_batch_size 4 / (world 8
// x GAS 1) = 0 micro-batch per rank)"); or naming the key whose value (given or derived) is above
// kMaxBatchSize.
BatchTriple resolve_batch_triple(std::optional<int64_t> train_batch_size,
                                 std::optional<int64_t> train_micro_batch_size_per_gpu,
                                 std::optional<int64_t> gradient_accumulation_steps, const DataParallelWorld& world);
// The same for a plain data-parallel world of `world_size` ranks (every parallel size 1).
BatchTriple resolve_batch_triple(std::optional<int64_t> train_batch_size,
                                 std::optional<int64_t> train_micro_batch_size_per_gpu,
                                 std::optional<int64_t> gradient_accumulation_steps, int world_size);

}  // namespace ds
