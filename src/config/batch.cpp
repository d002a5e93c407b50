// The batch-size triple, resolved exactly as DeepSpeed's _set_batch_related_parameters and
// _batch_assertion do it (reference §1.2), messages included.
#include <fmt/format.h>

#include "config/batch_config.h"
#include "util/error.h"

namespace ds {
namespace {

// 128-bit arithmetic: with every member bounded by kMaxBatchSize in magnitude and W < 2^31, no
// product here can overflow, so huge values fail with a message instead of wrapping around.
using Wide = __int128;

std::string str(Wide v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string out;
  for (; v != 0; v /= 10) out.insert(out.begin(), char('0' + int(negative ? -(v % 10) : v % 10)));
  return negative ? "-" + out : out;
}

// Python's // (floors toward negative infinity), so negative inputs fail with DeepSpeed's numbers.
Wide floor_div(Wide a, Wide b) {
  Wide q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

std::string batch_size_limit_message(const std::string& value) {
  return fmt::format("{} is above the limit {} (2^31 - 1) for batch sizes: no training run comes near it (the "
                     "largest use a few times 2^16 sequences per step), and below it every count and offset "
                     "computed from the batch (x sequence length x hidden size) fits in 64-bit integers",
                     value, kMaxBatchSize);
}

BatchTriple resolve_batch_triple(std::optional<int64_t> T, std::optional<int64_t> M, std::optional<int64_t> G,
                                 int world_size) {
  if (world_size < 1) throw ConfigError("", fmt::format("world size must be >= 1, got {}", world_size));
  // Bounds first, so that the arithmetic below stays exact.
  const std::pair<const std::optional<int64_t>*, const char*> given[] = {
      {&M, "train_micro_batch_size_per_gpu"}, {&G, "gradient_accumulation_steps"}, {&T, "train_batch_size"}};
  static constexpr const char* kDeepSpeedNames[] = {"Micro batch size per gpu", "Gradient accumulation steps",
                                                    "Train batch size"};
  for (int i = 0; i < 3; ++i) {
    const std::optional<int64_t>& v = *given[i].first;
    if (v && *v > kMaxBatchSize) throw ConfigError(given[i].second, batch_size_limit_message(std::to_string(*v)));
    if (v && *v < -kMaxBatchSize)
      throw ConfigError("", fmt::format("{}: {} has to be greater than 0", kDeepSpeedNames[i], *v));
  }
  const Wide W = world_size;
  Wide t = 0, m = 0, g = 0;
  if (T && M && G) {
    t = *T, m = *M, g = *G;
  } else if (T && M) {
    // DeepSpeed would die of ZeroDivisionError here; name the key instead.
    if (*M == 0) throw ConfigError("", "Micro batch size per gpu: 0 has to be greater than 0");
    t = *T, m = *M, g = floor_div(floor_div(*T, *M), W);
  } else if (T && G) {
    if (*G == 0) throw ConfigError("", "Gradient accumulation steps: 0 has to be greater than 0");
    t = *T, m = floor_div(floor_div(*T, W), *G), g = *G;
  } else if (M && G) {
    t = Wide(*M) * *G * W, m = *M, g = *G;
  } else if (T) {
    t = *T, m = floor_div(*T, W), g = 1;
  } else if (M) {
    t = Wide(*M) * W, m = *M, g = 1;
  } else {
    throw ConfigError("", "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
  }
  if (t <= 0) throw ConfigError("", fmt::format("Train batch size: {} has to be greater than 0", str(t)));
  if (m <= 0) throw ConfigError("", fmt::format("Micro batch size per gpu: {} has to be greater than 0", str(m)));
  if (g <= 0) throw ConfigError("", fmt::format("Gradient accumulation steps: {} has to be greater than 0", str(g)));
  if (t != m * g * W) {
    throw ConfigError("", fmt::format("Check batch related parameters. train_batch_size is not equal to "
                                      "micro_batch_per_gpu * gradient_acc_step * world_size {} != {} * {} * {}",
                                      str(t), str(m), str(g), world_size));
  }
  // Derived, the global batch can pass the limit when its members do not.
  if (t > kMaxBatchSize) {
    throw ConfigError("train_batch_size",
                      batch_size_limit_message(fmt::format("{} (micro {} x GAS {} x world {})", str(t), str(m), str(g), world_size)));
  }
  return {int64_t(t), int64_t(m), int64_t(g)};
}

}  // namespace ds
