// The batch-size triple, resolved exactly as DeepSpeed's _set_batch_related_parameters and
// _batch_assertion do it (reference §1.2), messages included.
#include <fmt/format.h>

#include "config/batch_config.h"
#include "util/error.h"

namespace ds {
namespace {

// Python's // (floors toward negative infinity), so negative inputs fail with DeepSpeed's numbers.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

BatchTriple resolve_batch_triple(std::optional<int64_t> T, std::optional<int64_t> M, std::optional<int64_t> G,
                                 int world_size) {
  if (world_size < 1) throw ConfigError("", fmt::format("world size must be >= 1, got {}", world_size));
  const int64_t W = world_size;
  BatchTriple b;
  if (T && M && G) {
    b = {*T, *M, *G};
  } else if (T && M) {
    // DeepSpeed would die of ZeroDivisionError here; name the key instead.
    if (*M == 0) throw ConfigError("", "Micro batch size per gpu: 0 has to be greater than 0");
    b = {*T, *M, floor_div(floor_div(*T, *M), W)};
  } else if (T && G) {
    if (*G == 0) throw ConfigError("", "Gradient accumulation steps: 0 has to be greater than 0");
    b = {*T, floor_div(floor_div(*T, W), *G), *G};
  } else if (M && G) {
    b = {*M * *G * W, *M, *G};
  } else if (T) {
    b = {*T, floor_div(*T, W), 1};
  } else if (M) {
    b = {*M * W, *M, 1};
  } else {
    throw ConfigError("", "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
  }
  const auto [t, m, g] = b;
  if (t <= 0) throw ConfigError("", fmt::format("Train batch size: {} has to be greater than 0", t));
  if (m <= 0) throw ConfigError("", fmt::format("Micro batch size per gpu: {} has to be greater than 0", m));
  if (g <= 0) throw ConfigError("", fmt::format("Gradient accumulation steps: {} has to be greater than 0", g));
  if (t != m * g * W) {
    throw ConfigError("", fmt::format("Check batch related parameters. train_batch_size is not equal to "
                                      "micro_batch_per_gpu * gradient_acc_step * world_size {} != {} * {} * {}",
                                      t, m, g, W));
  }
  return b;
}

}  // namespace ds
