#include "autotune/tuning_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "config/json_parse.h"
#include "runtime/dtype_policy.h"
#include "util/error.h"
#include "zero/memory_estimate.h"
#include "zero/stage3_step_estimate.h"

namespace ds::autotune {
namespace {

constexpr const char* kBatchKeys[] = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"};

bool offload_set(const Json& zero, const char* section) {
  if (!zero.is_object() || !zero.contains(section) || !zero[section].is_object()) return false;
  const Json& s = zero[section];
  return s.contains("device") && s["device"].is_string() && s["device"].get<std::string>() != "none";
}

const Json& zero_of(const Json& config) {
  static const Json empty = Json::object();
  return config.contains("zero_optimization") && config["zero_optimization"].is_object() ? config["zero_optimization"]
                                                                                          : empty;
}

}  // namespace

ModelProfile read_model_profile(const Json& j, const std::string& origin) {
  auto need = [&](const char* key) -> const Json& {
    DS_CHECK(j.is_object() && j.contains(key), Error, fmt::format("{}: no \"{}\" (written by an older engine?)", origin, key));
    return j[key];
  };
  ModelProfile p;
  try {
    p.num_params = need("num_params").get<int64_t>();
    p.trainable_num_params = need("trainable_num_params").get<int64_t>();
    p.activation_bytes = need("activation_mem_per_gpu").get<int64_t>();
    p.micro_batch_size = std::max<int64_t>(1, need("micro_batch_size").get<int64_t>());
    p.param_numels = need("param_numels").get<std::vector<int64_t>>();
    p.has_layer_list = need("has_layer_list").get<bool>();
    p.checkpointing = need("activation_checkpointing").get<bool>();
    p.world_size = need("world_size").get<int>();
    p.data_parallel_size = need("data_parallel_size").get<int>();
    p.local_world_size = std::max(1, need("local_world_size").get<int>());
    p.rss_before_forward = need("rss_before_forward_bytes").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed model profile: {}", origin, e.what()));
  }
  return p;
}

std::string Variant::name() const {
  std::string n = "z" + std::to_string(stage);
  if (offload_param) n += "_offparam";
  else if (offload_optimizer) n += "_offopt";
  if (checkpointing) n += "_ckpt";
  return n;
}

void Variant::apply(Json& config) const {
  Json& zero = config["zero_optimization"];
  if (!zero.is_object()) zero = Json::object();
  zero["stage"] = stage;
  if (offload_optimizer) zero["offload_optimizer"] = {{"device", "cpu"}};
  if (offload_param) zero["offload_param"] = {{"device", "cpu"}};
  // Any key of the section turns it on; one segment per layer (number_checkpoints unset).
  if (checkpointing) config["activation_checkpointing"] = {{"partition_activations", false}};
}

std::vector<Variant> stage_variants(int stage, const Json& user_config, bool has_layer_list) {
  const Json& zero = zero_of(user_config);
  const bool user_offopt = offload_set(zero, "offload_optimizer"), user_offparam = offload_set(zero, "offload_param");
  const bool user_ckpt = user_config.contains("activation_checkpointing") &&
                         user_config["activation_checkpointing"].is_object() &&
                         !user_config["activation_checkpointing"].empty();
  const bool ckpt = has_layer_list && !user_ckpt;
  std::vector<Variant> out{{stage}};
  if (ckpt) out.push_back({stage, false, false, true});
  if (stage >= 1 && !user_offopt) {
    out.push_back({stage, true});
    if (ckpt) out.push_back({stage, true, false, true});
  }
  if (stage == 3 && !user_offparam) {  // the engine offloads parameters only with the optimizer
    out.push_back({stage, !user_offopt, true});
    if (ckpt) out.push_back({stage, !user_offopt, true, true});
  }
  return out;
}

std::vector<int> requested_stages(const Json& user_config) {
  const Json& zero = zero_of(user_config);
  if (!zero.contains("stage")) return {0};  // DeepSpeed's autotuner: the user's stage, 0 when absent
  const Json& s = zero["stage"];
  std::set<int> stages;
  auto add = [&](const Json& v) {
    if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() > 3)
      throw ConfigError("zero_optimization.stage",
                        "for ds-autotune a stage 0-3, a list of them or \"all\"; got " + v.dump());
    stages.insert(v.get<int>());
  };
  if (s.is_string() && s.get<std::string>() == "all") return {0, 1, 2, 3};
  if (s.is_array()) {
    for (const Json& v : s) add(v);
  } else {
    add(s);
  }
  if (stages.empty()) throw ConfigError("zero_optimization.stage", "an empty list gives ds-autotune nothing to tune");
  return {stages.begin(), stages.end()};
}

Json base_config(const Json& user_config) {
  Json c = user_config;
  c.erase("autotuning");
  for (const char* key : kBatchKeys) c.erase(key);  // each experiment sets all three
  if (c.contains("zero_optimization") && c["zero_optimization"].is_object()) {
    Json& zero = c["zero_optimization"];
    zero.erase("stage");
    for (auto& [key, value] : zero.items())
      if (value.is_array() && !value.empty()) value = Json(value.front());  // a tuning list: its first value
  }
  return c;
}

Json experiment_config(const Json& base, const Variant& v, int64_t micro, int64_t gas, int64_t data_parallel) {
  Json c = base;
  v.apply(c);
  c["train_micro_batch_size_per_gpu"] = micro;
  c["gradient_accumulation_steps"] = gas;
  c["train_batch_size"] = micro * gas * data_parallel;
  return c;
}

uint64_t MemoryModel::states(const Json& config) const {
  const Config cfg = load_config_json(config, profile->world_size, "<ds-autotune experiment>");
  zero::EstimateInput in;
  in.param_numels = profile->param_numels;
  in.world = cfg.data_parallel_size * cfg.parallel_sizes.sequence_parallel_size;
  in.plan = resolve_dtype_plan(cfg, torch::kCPU);
  in.config = &cfg;
  const MemoryLedger m = zero::estimate_model_states(in);
  uint64_t gathered = 0;  // stage 3: what a step holds gathered on top (reuse distance, persistence)
  if (cfg.zero_optimization.stage == 3) {
    // The profile knows tensors, not layers: one tensor per layer is exact at the default distance
    // (the whole model is kept) and may undercount a layer at small distances.
    zero::Stage3StepInput step;
    step.param_numels = profile->param_numels;
    for (size_t id = 0; id < step.param_numels.size(); ++id) step.layer_params.push_back({id});
    gathered = uint64_t(zero::stage3_peak_gathered_numel(step, cfg.zero_optimization)) * c10::elementSize(in.plan.compute);
  }
  return m.tier_total(Tier::Device) + m.tier_total(Tier::Cpu) + gathered;
}

namespace {
uint64_t activations_per_sample(const MemoryModel& m, bool checkpointing) {
  const int64_t per_micro = checkpointing && m.checkpointed_activation_bytes ? *m.checkpointed_activation_bytes
                                                                              : m.profile->activation_bytes;
  return uint64_t((per_micro + m.profile->micro_batch_size - 1) / m.profile->micro_batch_size);
}
}  // namespace

uint64_t MemoryModel::need(const Json& config, int64_t micro, bool checkpointing) const {
  return states(config) + uint64_t(micro) * activations_per_sample(*this, checkpointing) + overhead;
}

int64_t MemoryModel::max_micro(const Json& config_at_micro1, bool checkpointing, int64_t cap) const {
  const uint64_t fixed = states(config_at_micro1) + overhead;
  if (fixed >= budget) return 0;
  const uint64_t per = std::max<uint64_t>(1, activations_per_sample(*this, checkpointing));
  return std::min<int64_t>(cap, int64_t((budget - fixed) / per));
}

std::vector<int64_t> tuning_micro_batch_sizes(int64_t min_micro, int64_t max_micro, int64_t count,
                                              int64_t max_train_batch_size_per_gpu) {
  if (min_micro <= 0 || max_micro <= 0 || min_micro > max_micro) return {};
  if (min_micro < max_micro / 2) min_micro = max_micro / 2;
  const int64_t stride = std::max<int64_t>(1, (max_micro - min_micro) / std::max<int64_t>(1, count));
  const int64_t min_gas = max_train_batch_size_per_gpu / max_micro;
  std::vector<int64_t> out;
  for (int64_t mbs = min_micro; mbs < max_micro; mbs += stride)
    if (max_train_batch_size_per_gpu / mbs != min_gas) out.push_back(mbs);
  out.push_back(max_micro);
  return out;
}

std::vector<Json> zero_knob_grid(int stage, const Json& user_zero) {
  const Json sizes = Json::array({5e7, 5e8, 1e9});
  std::vector<std::pair<std::string, Json>> space;  // DeepSpeed's DEFAULT_TUNING_SPACE_ZERO_<stage>
  if (stage == 1) space = {{"reduce_bucket_size", sizes}, {"allgather_bucket_size", sizes}};
  if (stage == 2)
    space = {{"overlap_comm", {true, false}}, {"reduce_scatter", {false, true}}, {"reduce_bucket_size", sizes},
             {"allgather_bucket_size", sizes}, {"contiguous_gradients", {false, true}}};
  if (stage == 3)
    space = {{"overlap_comm", {true, false}}, {"reduce_scatter", {false, true}}, {"reduce_bucket_size", sizes},
             {"allgather_partitions", {true, false}}, {"allgather_bucket_size", sizes},
             {"contiguous_gradients", {false, true}}};
  if (user_zero.is_object()) {  // the user's value fixes a knob, a list of values replaces its range
    for (auto& [key, values] : space)
      if (user_zero.contains(key)) values = user_zero[key].is_array() ? user_zero[key] : Json::array({user_zero[key]});
    for (const auto& [key, value] : user_zero.items())
      if (value.is_array() && key != "stage" &&
          std::none_of(space.begin(), space.end(), [&](const auto& kv) { return kv.first == key; }))
        space.emplace_back(key, value);
  }
  std::vector<Json> grid{Json::object()};
  for (const auto& [key, values] : space) {
    std::vector<Json> next;
    for (const Json& point : grid)
      for (const Json& v : values) {
        Json p = point;
        p[key] = v;
        next.push_back(std::move(p));
      }
    grid = std::move(next);
  }
  return grid;
}

std::string knob_name(const Json& knobs) {
  static const std::map<std::string, std::string> kShort = {
      {"overlap_comm", "oc"}, {"reduce_scatter", "rs"}, {"reduce_bucket_size", "rbs"},
      {"allgather_partitions", "ap"}, {"allgather_bucket_size", "abs"}, {"contiguous_gradients", "cg"}};
  std::string out;
  for (const auto& [key, value] : knobs.items()) {
    auto it = kShort.find(key);
    std::string v = value.is_boolean() ? (value.get<bool>() ? "1" : "0")
                    : value.is_number() ? fmt::format("{:g}", value.get<double>())
                                        : value.dump();
    out += (out.empty() ? "" : "_") + (it != kShort.end() ? it->second : key) + v;
  }
  return out;
}

}  // namespace ds::autotune
