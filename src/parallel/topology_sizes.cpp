// Resolving the parallel sizes against the world: errors name the key and show the arithmetic.
#include "parallel/topology_sizes.h"

#include <fmt/format.h>

#include <vector>

#include "util/error.h"

namespace ds::parallel {
namespace {

struct Factor {
  int value;
  const char* path;  // the config key
  const char* name;  // how messages call it
};

// "1, 2, 3, 6"
std::string divisors(int n) {
  std::string s;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return s;
}

}  // namespace

std::string describe(const TopologySizes& s) {
  return "num_stages " + std::to_string(s.pipe) + ", autotp_size " + std::to_string(s.tensor) +
         ", sequence_parallel_size " + std::to_string(s.sequence) + ", ep_size " + std::to_string(s.expert);
}

TopologyShape resolve_shape(int world, const TopologySizes& sizes) {
  DS_CHECK(world >= 1, Error, "resolve_shape: world size " + std::to_string(world) + " (must be >= 1)");
  const std::vector<Factor> factors = {{sizes.pipe, "pipeline.stages", "num_stages"},
                                       {sizes.tensor, "tensor_parallel.autotp_size", "autotp_size"},
                                       {sizes.sequence, "sequence_parallel_size", "sequence_parallel_size"}};
  for (const Factor& f : factors)
    if (f.value < 1)
      throw ConfigError(f.path, std::string(f.name) + " must be a positive integer, got " + std::to_string(f.value));
  if (sizes.expert < 1)
    throw ConfigError("", "the expert-parallel size (ep_size) must be a positive integer, got " +
                              std::to_string(sizes.expert));

  // Multiply in the grid's order; the first factor that breaks divisibility is the one named.
  int product = 1;
  std::string chain;  // "num_stages 2 x autotp_size 3"
  for (const Factor& f : factors) {
    if (f.value == 1) continue;
    const std::string term = std::string(f.name) + " " + std::to_string(f.value);
    if (world % (int64_t(product) * f.value) != 0) {
      const std::string by = chain.empty() ? term : chain + " x " + term + " = " + std::to_string(product * f.value);
      throw ConfigError(f.path, "world " + std::to_string(world) + " is not divisible by " + by +
                                    " (the data-parallel size is the world divided by num_stages x autotp_size x "
                                    "sequence_parallel_size and must be a whole number; " +
                                    f.name + " values that fit: " + divisors(world / product) + ")");
    }
    product *= f.value;
    chain += (chain.empty() ? "" : " x ") + term;
  }

  TopologyShape s;
  s.world = world;
  s.pipe = sizes.pipe;
  s.model = sizes.tensor;
  s.sequence = sizes.sequence;
  s.data = world / product;
  s.expert = sizes.expert;
  if (sizes.expert > 1) {
    if (s.data % sizes.expert != 0)
      throw ConfigError("", "the expert-parallel size (ep_size) " + std::to_string(sizes.expert) +
                                " does not divide the data-parallel size " + std::to_string(s.data) + " = world " +
                                std::to_string(world) + (chain.empty() ? "" : " / (" + chain + ")") +
                                "; expert groups are made of data-parallel ranks (ep_size values that fit: " +
                                divisors(s.data) + ")");
    DS_CHECK(sizes.sequence == 1, NotSupported,
             "expert parallelism (ep_size " + std::to_string(sizes.expert) + ") together with sequence parallelism "
             "(sequence_parallel_size " + std::to_string(sizes.sequence) + ") is not supported yet: use one of them");
  }
  return s;
}

void check_batch_world(int resolved_for, int running) {
  if (resolved_for == running) return;
  throw ConfigError("train_batch_size", fmt::format("the batch triple was resolved for world size {} but {} ranks are "
                                                    "running; load the config with the launcher's world size "
                                                    "(ds::initialize does)",
                                                    resolved_for, running));
}

}  // namespace ds::parallel
