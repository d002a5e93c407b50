// DeepSpeed's elasticity algorithm (deepspeed/elasticity/elasticity.py), step for step: the
// candidate batches are each micro batch and their LCM scaled by the largest highly composite
// number that keeps them within max_train_batch_size; the winner is the candidate most world
// sizes divide. Python's truncating int() and `x or default` are spelled out where they matter.
#include "config/elasticity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include "config/json_parse.h"
#include "config/parse_sections.h"
#include "config/section_reader.h"
#include "util/error.h"

namespace ds {
namespace {

using config_detail::Json;

// The 38 smallest highly composite numbers (HCN_LIST): enough for batches up to 720K.
constexpr int64_t kHcn[] = {1,     2,      4,      6,      12,     24,     36,     48,     60,     120,
                            180,   240,    360,    720,    840,    1260,   1680,   2520,   5040,   7560,
                            10080, 15120,  20160,  25200,  27720,  45360,  50400,  55440,  83160,  110880,
                            166320, 221760, 277200, 332640, 498960, 554400, 665280, 720720};

ConfigError error(const std::string& key, const std::string& message) {
  return ConfigError(key.empty() ? "elasticity" : "elasticity." + key, message);
}

// get_candidate_batch_sizes: each base scaled by the largest HCN with base x HCN <= the cap. A base
// above the cap is dropped (only the LCM can be); np.argmax of an all-false array is 0, so a
// quotient beyond the list takes its last entry (index -1), as Python does.
std::vector<int64_t> candidate_batch_sizes(const std::vector<int64_t>& bases, int64_t cap) {
  std::set<int64_t> out;
  for (int64_t base : bases) {
    if (base > cap) continue;
    if (base == cap) {
      out.insert(base);
      continue;
    }
    const int64_t quotient = cap / base;
    size_t first_above = 0;
    for (size_t i = 0; i < std::size(kHcn); ++i)
      if (kHcn[i] > quotient) {
        first_above = i;
        break;
      }
    const size_t index = first_above == 0 ? std::size(kHcn) - 1 : first_above - 1;
    out.insert(kHcn[index] * base);
  }
  return {out.begin(), out.end()};
}

// get_valid_gpus: for each micro batch dividing the batch, batch / micro and its divisors up to
// half of it, within [lo, hi].
std::vector<int64_t> valid_world_sizes(int64_t batch, const std::vector<int64_t>& micro, int64_t lo, int64_t hi) {
  std::set<int64_t> valid;
  for (int64_t m : micro) {
    if (batch % m != 0) continue;
    const int64_t most = batch / m;
    if (lo <= most && most <= hi) valid.insert(most);
    for (int64_t i = 1; i <= most / 2; ++i) {
      if (i > hi) break;
      if (i < lo) continue;
      if (most % i == 0) valid.insert(i);
    }
  }
  return {valid.begin(), valid.end()};
}

struct Best {
  int64_t batch = 0;
  std::optional<std::vector<int64_t>> valid;  // None in DeepSpeed when no candidate won
};

// get_best_candidates: the most valid world sizes wins; ties go to the larger (smaller) batch.
// Python iterates a set of ints, which for these sizes is ascending order, as here.
Best best_candidate(const std::vector<int64_t>& candidates, const std::vector<int64_t>& micro, int64_t lo,
                    int64_t hi, bool prefer_larger) {
  Best best;
  best.batch = *std::min_element(micro.begin(), micro.end());
  size_t most = 0;
  for (int64_t batch : candidates) {
    std::vector<int64_t> valid = valid_world_sizes(batch, micro, lo, hi);
    const bool tie_wins = prefer_larger ? batch > best.batch : batch < best.batch;
    if (valid.size() > most || (valid.size() == most && tie_wins)) {
      most = valid.size();
      best.valid = std::move(valid);
      best.batch = batch;
    }
  }
  return best;
}

// _get_compatible_gpus_v01. lo/hi of 0 mean "not given" (Python's `min_gpus or 1`).
Best compatible_v01(const std::vector<int64_t>& micro, int64_t cap, int64_t lo, int64_t hi, bool prefer_larger) {
  const int64_t smallest = *std::min_element(micro.begin(), micro.end());
  if (lo == 0) lo = 1;
  if (hi == 0) hi = cap / smallest;
  for (int64_t m : micro)
    if (m > cap)
      throw error("micro_batch_sizes", fmt::format("All micro batches must be less than or equal to "
                                                   "max_acceptable_batch_size: {} (micro batch {} is above "
                                                   "max_train_batch_size {})",
                                                   cap, m, cap));
  int64_t lcm = 1;
  for (int64_t m : micro) lcm = std::lcm(lcm, m);
  std::vector<int64_t> bases = micro;
  bases.push_back(lcm);
  return best_candidate(candidate_batch_sizes(bases, cap), micro, lo, hi, prefer_larger);
}

// get_microbatch of version 0.2: the first (or, preferring larger, the largest) listed micro batch
// dividing batch / data-parallel size, in the list's own order.
int64_t micro_for_v02(const ElasticityConfig& c, int64_t batch, int64_t dp) {
  int64_t chosen = 0;
  for (int64_t m : c.micro_batch_sizes) {
    if (dp <= 0 || (batch / dp) % m != 0) continue;
    if (chosen == 0) chosen = m;
    if (c.prefer_larger_batch && chosen < m) chosen = m;
  }
  return chosen;
}

struct V02 {
  int64_t batch = 0;
  std::vector<int64_t> valid;
  int64_t micro = 0;
};

// _get_compatible_gpus_v02: version 0.1 over whole nodes, scaled by the data-parallel ranks per node;
// a current size outside the list gets a batch of its own (the largest multiple of micro x dp that fits).
V02 compatible_v02(const ElasticityConfig& c, int64_t current) {
  if (c.num_gpus_per_node % c.model_parallel_size != 0)
    throw error("num_gpus_per_node", fmt::format("In Elasticity v0.2, number of GPUs per node:{} should be divisible "
                                                 "by model parallel size {}",
                                                 c.num_gpus_per_node, c.model_parallel_size));
  const int64_t dp_per_node = c.num_gpus_per_node / c.model_parallel_size;
  const auto trunc_div = [](int64_t a, int64_t b) { return static_cast<int64_t>(double(a) / double(b)); };
  Best nodes = compatible_v01(c.micro_batch_sizes, trunc_div(c.max_train_batch_size, dp_per_node),
                              trunc_div(c.min_gpus, c.num_gpus_per_node), trunc_div(c.max_gpus, c.num_gpus_per_node),
                              c.prefer_larger_batch);
  V02 out;
  out.batch = nodes.batch * dp_per_node;
  for (int64_t n : nodes.valid.value_or(std::vector<int64_t>{})) out.valid.push_back(n * dp_per_node);
  const int64_t dp = current / c.model_parallel_size;
  if (std::find(out.valid.begin(), out.valid.end(), dp) != out.valid.end()) {
    out.micro = micro_for_v02(c, out.batch, dp);
    return out;
  }
  const double current_dp = double(current) / double(c.num_gpus_per_node) * double(dp_per_node);
  std::optional<double> pick;
  for (int64_t m : c.micro_batch_sizes) {
    const double smallest = double(m) * current_dp;
    const double batch = std::floor(double(c.max_train_batch_size) / smallest) * smallest;
    if (!pick || (c.prefer_larger_batch ? batch > *pick : batch < *pick)) pick = batch;
  }
  out.batch = static_cast<int64_t>(*pick);
  out.valid = {static_cast<int64_t>(current_dp)};
  out.micro = micro_for_v02(c, out.batch, static_cast<int64_t>(current_dp));
  return out;
}

int64_t read_int(config_detail::SectionReader& s, const char* key, int64_t dflt) {
  int64_t v = dflt;
  s.read(key, v);
  return v;
}

double read_version(config_detail::SectionReader& s) {
  const Json* v = s.take("version");
  if (v == nullptr) return kLatestElasticityVersion;
  if (v->is_number()) return v->get<double>();
  if (v->is_string()) {  // Python's float("0.1")
    const std::string text = v->get<std::string>();
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && *end == '\0') return parsed;
  }
  throw error("version", "expected a number such as 0.1 or 0.2, got " + config_detail::show(*v));
}

}  // namespace

namespace config_detail {

ElasticityConfig read_elasticity_section(SectionReader& s) {
  ElasticityConfig c;
  s.read("enabled", c.enabled);
  if (!c.enabled) {
    // DeepSpeed reads nothing else of a disabled section.
    for (const auto& [key, value] : s.object().items()) s.mark_known(key);
    return c;
  }
  for (const char* required : {"max_train_batch_size", "micro_batch_sizes"})
    if (!s.given(required)) throw error(required, fmt::format("Elasticity config missing {}", required));
  c.max_train_batch_size = read_int(s, "max_train_batch_size", c.max_train_batch_size);
  const Json* micro = s.take("micro_batch_sizes");
  if (micro == nullptr || !micro->is_array())
    throw error("micro_batch_sizes", "Elasticity expected value of micro_batch_sizes to be a list of micro batches, "
                                     "instead is: " + (micro ? config_detail::show(*micro) : std::string("auto")));
  c.micro_batch_sizes.clear();
  for (const Json& m : *micro) {
    const std::optional<int64_t> v = m.is_number_integer() ? std::optional<int64_t>(m.get<int64_t>()) : std::nullopt;
    if (!v) throw error("micro_batch_sizes", "Elasticity expected micro_batch_sizes to only contain a list of "
                                             "integers, instead contains: " + config_detail::show(*micro));
    if (*v <= 0) throw error("micro_batch_sizes", "Elasticity expected micro_batch_sizes to only contain positive "
                                                  "integers, instead contains: " + config_detail::show(*micro));
    c.micro_batch_sizes.push_back(*v);
  }
  if (c.micro_batch_sizes.empty()) throw error("micro_batch_sizes", "Elasticity expected at least one micro batch, got []");
  c.min_gpus = read_int(s, "min_gpus", c.min_gpus);
  c.max_gpus = read_int(s, "max_gpus", c.max_gpus);
  if (c.min_gpus < 1 || c.max_gpus < 1)
    throw error(c.min_gpus < 1 ? "min_gpus" : "max_gpus",
                fmt::format("Elasticity min/max gpus must be > 0, given min_gpus: {}, max_gpus: {}", c.min_gpus, c.max_gpus));
  if (c.max_gpus < c.min_gpus)
    throw error("min_gpus", fmt::format("Elasticity min_gpus cannot be greater than max_gpus, given min_gpus: {}, "
                                        "max_gpus: {}", c.min_gpus, c.max_gpus));
  c.model_parallel_size = read_int(s, "model_parallel_size", c.model_parallel_size);
  if (c.model_parallel_size < 1)
    throw error("model_parallel_size", fmt::format("Model-Parallel size cannot be less than 1, given model-parallel "
                                                   "size: {}", c.model_parallel_size));
  c.num_gpus_per_node = read_int(s, "num_gpus_per_node", c.num_gpus_per_node);
  if (c.num_gpus_per_node < 1)
    throw error("num_gpus_per_node", fmt::format("Number of GPUs per node cannot be less than 1, given number of GPUs "
                                                 "per node: {}", c.num_gpus_per_node));
  s.read("min_time", c.min_time);
  if (c.min_time < 0) throw error("min_time", fmt::format("Elasticity min time needs to be >= 0: given {}", c.min_time));
  c.version = read_version(s);
  s.read("prefer_larger_batch", c.prefer_larger_batch);
  s.read("ignore_non_elastic_batch_info", c.ignore_non_elastic_batch_info);
  s.finish();
  return c;
}

}  // namespace config_detail

ElasticityConfig parse_elasticity_config(const nlohmann::json& section, std::vector<std::string>* warnings) {
  config_detail::ParseContext ctx;
  config_detail::SectionReader s(ctx, &section, "elasticity", config_detail::UnknownKeys::Warn);
  ElasticityConfig c = config_detail::read_elasticity_section(s);
  if (warnings != nullptr) *warnings = std::move(ctx.warnings);
  return c;
}

std::optional<ElasticJob> read_elastic_job(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("", "cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json root = parse_config_json(text.str(), path);
  if (!root.is_object() || !root.contains("elasticity")) return std::nullopt;
  ElasticJob job;
  job.elasticity = parse_elasticity_config(root.at("elasticity"));
  if (!job.elasticity.enabled) return std::nullopt;
  const ParallelSizes sizes = config_detail::read_parallel_sizes_of(root);
  job.ranks_per_replica = int64_t{sizes.pipeline_stages} * sizes.autotp_size * sizes.sequence_parallel_size;
  return job;
}

std::string format_world_sizes(const std::vector<int64_t>& sizes) {
  std::string out;
  for (int64_t v : sizes) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

namespace {

// compute_elastic_config up to its world-size branch: the batch and the valid sizes (and version
// 0.2's own micro batch for `current`).
ElasticBatch batch_and_valid_sizes(const ElasticityConfig& c, int64_t current, int64_t* v02_micro) {
  if (!c.enabled)
    throw error("enabled", "Elasticity is disabled, please enable it ('enabled':true) if running an elastic training job.");
  if (c.model_parallel_size > 1 && c.version != 0.2)
    throw error("model_parallel_size", fmt::format("Elasticity V{} does not support model-parallel training. Given "
                                                   "model-parallel size: {}", c.version, c.model_parallel_size));
  if (c.version > kLatestElasticityVersion)
    throw error("version", fmt::format("Attempting to run elasticity version {} but runtime only supports up to {}",
                                       c.version, kLatestElasticityVersion));
  ElasticBatch out;
  if (c.version == 0.1) {
    Best best = compatible_v01(c.micro_batch_sizes, c.max_train_batch_size, c.min_gpus, c.max_gpus, c.prefer_larger_batch);
    out.train_batch_size = best.batch;
    out.valid_world_sizes = best.valid.value_or(std::vector<int64_t>{});
  } else if (c.version == 0.2) {
    if (current <= 0)
      throw error("version", "Elasticity V 0.2 needs WORLD_SIZE to compute valid batch size (the world size to run "
                             "with); use \"version\": 0.1 to compute the valid sizes without one");
    V02 v = compatible_v02(c, current);
    out.train_batch_size = v.batch;
    out.valid_world_sizes = std::move(v.valid);
    *v02_micro = v.micro;
  } else {
    throw error("version", fmt::format("Unable to find elastic logic for version: {} (0.1 and 0.2 exist)", c.version));
  }
  if (out.valid_world_sizes.empty())
    throw error("", fmt::format("no world size in min_gpus {} .. max_gpus {} fits: the batch {} (the best of "
                                "max_train_batch_size {} with micro_batch_sizes [{}]) divides into none of them",
                                c.min_gpus, c.max_gpus, out.train_batch_size, c.max_train_batch_size,
                                format_world_sizes(c.micro_batch_sizes)));
  return out;
}

// `world_size` must be valid; then the largest listed micro batch dividing the per-rank share.
void pick_micro_batch(const ElasticityConfig& c, int64_t world_size, ElasticBatch& out) {
  const auto& valid = out.valid_world_sizes;
  if (std::find(valid.begin(), valid.end(), world_size) == valid.end())
    throw error("", fmt::format("World size ({}) is not valid with the current list of valid GPU counts: [{}] "
                                "(train batch {} from max_train_batch_size {} and micro_batch_sizes [{}])",
                                world_size, format_world_sizes(valid), out.train_batch_size, c.max_train_batch_size,
                                format_world_sizes(c.micro_batch_sizes)));
  std::vector<int64_t> descending = c.micro_batch_sizes;
  std::sort(descending.rbegin(), descending.rend());
  for (int64_t m : descending)
    if ((out.train_batch_size / world_size) % m == 0) {
      out.micro_batch_size = m;
      break;
    }
  if (out.micro_batch_size == 0)
    throw error("micro_batch_sizes", fmt::format("Unable to find divisible micro batch size world_size={}, "
                                                 "final_batch_size={}, and micro_batches=[{}].",
                                                 world_size, out.train_batch_size, format_world_sizes(c.micro_batch_sizes)));
}

void set_accumulation(ElasticBatch& out, int64_t data_parallel) {
  if (out.micro_batch_size > 0 && data_parallel > 0)
    out.gradient_accumulation_steps = out.train_batch_size / (out.micro_batch_size * data_parallel);
}

}  // namespace

ElasticBatch compute_elastic_config(const ElasticityConfig& c, int64_t world_size) {
  int64_t v02_micro = 0;
  ElasticBatch out = batch_and_valid_sizes(c, world_size, &v02_micro);
  if (world_size <= 0) return out;
  pick_micro_batch(c, world_size, out);
  set_accumulation(out, world_size);
  return out;
}

ElasticBatch compute_elastic_config_for_scheduler(const ElasticityConfig& c, int64_t current_world_size) {
  int64_t v02_micro = 0;
  ElasticBatch out = batch_and_valid_sizes(c, current_world_size, &v02_micro);
  if (c.version == 0.1) {
    if (current_world_size <= 0)
      throw error("version", "Elasticity V 0.1 needs WORLD_SIZE to compute a micro batch size");
    pick_micro_batch(c, current_world_size, out);
    set_accumulation(out, current_world_size);
    return out;
  }
  if (v02_micro == 0)
    throw error("micro_batch_sizes", fmt::format("no listed micro batch divides the per-rank share of batch {} at "
                                                 "world size {}", out.train_batch_size, current_world_size));
  out.micro_batch_size = v02_micro;
  set_accumulation(out, current_world_size / c.model_parallel_size);
  return out;
}

}  // namespace ds
