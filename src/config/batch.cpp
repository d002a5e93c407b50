// The batch-size triple, resolved exactly as DeepSpeed's _set_batch_related_parameters and
// _batch_assertion do it (reference §1.2), messages included.
#include <fmt/format.h>

#include <vector>

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

std::string DataParallelWorld::term() const {
  return trivial() ? fmt::format("world {}", world) : fmt::format("data-parallel world {}", size);
}

namespace {

struct Factor {
  int value;
  const char* key;
};

std::vector<Factor> factors_of(const ParallelSizes& s) {
  // DeepSpeed's grid order: pipe, (data), sequence, model.
  return {{s.pipeline_stages, "pipeline.stages"},
          {s.sequence_parallel_size, "sequence_parallel_size"},
          {s.autotp_size, "tensor_parallel.autotp_size"}};
}

// "1, 2, 3, 6"
std::string divisors(int n) {
  std::string out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

}  // namespace

std::string DataParallelWorld::derivation() const {
  if (trivial()) return "";
  std::string by;
  for (const Factor& f : factors_of(sizes))
    if (f.value != 1) by += fmt::format("{}{} {}", by.empty() ? "" : " x ", f.key, f.value);
  return fmt::format("data-parallel world {} = world {} / ({})", size, world, by);
}

DataParallelWorld resolve_data_parallel_world(int world, const ParallelSizes& sizes) {
  if (world < 1) throw ConfigError("", fmt::format("world size must be >= 1, got {}", world));
  int product = 1;
  std::string chain;  // "pipeline.stages 2 x sequence_parallel_size 2"
  for (const Factor& f : factors_of(sizes)) {
    if (f.value < 1) throw ConfigError(f.key, fmt::format("{} must be >= 1", f.value));
    if (f.value == 1) continue;
    const std::string term = fmt::format("{} {}", f.key, f.value);
    if (world % (int64_t{product} * f.value) != 0) {
      const std::string by = chain.empty() ? term : fmt::format("{} x {} = {}", chain, term, int64_t{product} * f.value);
      throw ConfigError(f.key, fmt::format("world {} is not divisible by {} (the batch triple is resolved for the "
                                           "data-parallel world, world / (pipeline.stages x sequence_parallel_size x "
                                           "tensor_parallel.autotp_size), which must be a whole number; values that "
                                           "fit: {})",
                                           world, by, divisors(world / product)));
    }
    product *= f.value;
    chain += (chain.empty() ? "" : " x ") + term;
  }
  return {world, world / product, sizes};
}

BatchTriple resolve_batch_triple(std::optional<int64_t> T, std::optional<int64_t> M, std::optional<int64_t> G,
                                 int world_size) {
  if (world_size < 1) throw ConfigError("", fmt::format("world size must be >= 1, got {}", world_size));
  return resolve_batch_triple(T, M, G, DataParallelWorld{world_size, world_size, {}});
}

BatchTriple resolve_batch_triple(std::optional<int64_t> T, std::optional<int64_t> M, std::optional<int64_t> G,
                                 const DataParallelWorld& dp) {
  const int world_size = dp.size;
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
      throw ConfigError("", fmt::format("{}: {} has to be greater than 0 ({} as given)", kDeepSpeedNames[i], *v,
                                        given[i].second));
  }
  const Wide W = world_size;
  const std::string world = dp.term();
  // How each member was obtained, for the messages: "train_batch_size 4 / (world 8 x GAS 1) = 0".
  std::string how_t = "train_batch_size as given", how_m = "train_micro_batch_size_per_gpu as given",
              how_g = "gradient_accumulation_steps as given";
  Wide t = 0, m = 0, g = 0;
  if (T && M && G) {
    t = *T, m = *M, g = *G;
  } else if (T && M) {
    // DeepSpeed would die of ZeroDivisionError here; name the key instead.
    if (*M == 0)
      throw ConfigError("", "Micro batch size per gpu: 0 has to be greater than 0 (train_micro_batch_size_per_gpu "
                            "as given)");
    t = *T, m = *M, g = floor_div(floor_div(*T, *M), W);
    how_g = fmt::format("train_batch_size {} / (micro {} x {}) = {} accumulation steps", str(t), str(m), world, str(g));
  } else if (T && G) {
    if (*G == 0)
      throw ConfigError("", "Gradient accumulation steps: 0 has to be greater than 0 (gradient_accumulation_steps "
                            "as given)");
    t = *T, m = floor_div(floor_div(*T, W), *G), g = *G;
    how_m = fmt::format("train_batch_size {} / ({} x GAS {}) = {} micro-batch per rank", str(t), world, str(g), str(m));
  } else if (M && G) {
    t = Wide(*M) * *G * W, m = *M, g = *G;
    how_t = fmt::format("micro {} x GAS {} x {} = {}", str(m), str(g), world, str(t));
  } else if (T) {
    t = *T, m = floor_div(*T, W), g = 1;
    how_m = fmt::format("train_batch_size {} / ({} x GAS 1) = {} micro-batch per rank", str(t), world, str(m));
    how_g = "gradient_accumulation_steps 1 when only train_batch_size is given";
  } else if (M) {
    t = Wide(*M) * W, m = *M, g = 1;
    how_t = fmt::format("micro {} x GAS 1 x {} = {}", str(m), world, str(t));
  } else {
    throw ConfigError("", "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
  }
  // DeepSpeed's text, then the arithmetic in parentheses (and how the data-parallel world came about).
  const std::string dp_note = dp.trivial() ? "" : "; " + dp.derivation();
  auto fail = [&](const std::string& deepspeed_text, const std::string& how) {
    throw ConfigError("", fmt::format("{} ({}{})", deepspeed_text, how, dp_note));
  };
  if (t <= 0) fail(fmt::format("Train batch size: {} has to be greater than 0", str(t)), how_t);
  if (m <= 0) fail(fmt::format("Micro batch size per gpu: {} has to be greater than 0", str(m)), how_m);
  if (g <= 0) fail(fmt::format("Gradient accumulation steps: {} has to be greater than 0", str(g)), how_g);
  if (t != m * g * W) {
    std::string how = fmt::format("micro {} x GAS {} x {} = {}, not train_batch_size {}", str(m), str(g), world,
                                  str(m * g * W), str(t));
    if (how_m.find(" = ") != std::string::npos) how += "; " + how_m + ", rounded down";
    if (how_g.find(" = ") != std::string::npos) how += "; " + how_g + ", rounded down";
    fail(fmt::format("Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                     "gradient_acc_step * world_size {} != {} * {} * {}",
                     str(t), str(m), str(g), world_size),
         how);
  }
  // Derived, the global batch can pass the limit when its members do not.
  if (t > kMaxBatchSize) {
    throw ConfigError("train_batch_size", batch_size_limit_message(fmt::format("{} (micro {} x GAS {} x {})", str(t),
                                                                               str(m), str(g), world)));
  }
  return {int64_t(t), int64_t(m), int64_t(g)};
}

}  // namespace ds
