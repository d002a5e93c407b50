#include "autotune/autotuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "config/json_parse.h"
#include "config/loader.h"
#include "util/error.h"
#include "util/system_info.h"

namespace ds::autotune {
namespace fs = std::filesystem;
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) throw ConfigError("", "cannot read the config " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_json(const fs::path& path, const Json& j) {
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  DS_CHECK(out.good(), IoError, "ds-autotune: cannot write " + path.string());
}

std::string duration(double s) {
  const int64_t t = int64_t(s);
  return fmt::format("{}:{:02d}:{:02d}", t / 3600, int(t / 60 % 60), int(t % 60));
}

std::string experiment_name(const Variant& v, int64_t gas, int64_t micro) {
  return fmt::format("{}_gas{}_tmbspg{}", v.name(), gas, micro);  // DeepSpeed's z<stage>_gas<g>_tmbspg<m>
}

}  // namespace

Autotuner::Autotuner(AutotuneOptions options) : opt_(std::move(options)) {
  user_ = parse_config_json(read_text(opt_.config_path), opt_.config_path);
  if (!user_.is_object() || !user_.contains("autotuning") || !user_["autotuning"].is_object() ||
      user_["autotuning"].value("enabled", false) != true)
    throw ConfigError("autotuning", opt_.config_path + " has no \"autotuning\" section with \"enabled\": true "
                                    "(docs/autotuning.md)");
  // The section's own checks: the loader reads it next to a placeholder batch.
  at_ = load_config_json(Json{{"train_micro_batch_size_per_gpu", 1}, {"autotuning", user_["autotuning"]}}, 1,
                         opt_.config_path)
            .autotuning;
  base_ = base_config(user_);
  for (const std::string& dir : {at_.results_dir, at_.exps_dir}) {
    std::error_code ec;
    if (at_.overwrite) fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    DS_CHECK(!ec, IoError, fmt::format("autotuning: cannot create {} ({})", dir, ec.message()));
  }
}

bool Autotuner::better(double a, double b) const {
  return at_.metric == AutotuningMetric::Latency ? a < b : a > b;
}

std::string Autotuner::metric_key() const {
  switch (at_.metric) {
    case AutotuningMetric::Latency: return "latency";
    case AutotuningMetric::Flops: return "FLOPS_per_gpu";
    default: return "throughput";
  }
}

std::string Autotuner::metric_unit() const {
  switch (at_.metric) {
    case AutotuningMetric::Latency: return "ms/step";
    case AutotuningMetric::Flops: return "FLOPS per rank";
    default: return "samples/s";
  }
}

Record Autotuner::run(const std::string& name, const std::string& space, const Json& config, int stage, int64_t micro,
                      int64_t gas, uint64_t need) {
  Record r;
  r.name = name;
  r.space = space;
  r.config = config;
  r.stage = stage;
  r.micro = micro;
  r.gas = gas;
  r.need_bytes = need;
  const fs::path dir = fs::absolute(fs::path(at_.results_dir) / name);
  fs::create_directories(dir);
  r.result_dir = dir.string();
  const fs::path metric_file = dir / "metrics.json";
  Json c = config;
  if (!c.contains("autotuning")) {
    c["autotuning"] = user_["autotuning"];
    c["autotuning"].erase("results_dir");  // as DeepSpeed: the experiment's own section carries no folders
    c["autotuning"].erase("exps_dir");
    c["autotuning"]["metric_path"] = metric_file.string();
  }
  const fs::path config_file = dir / "ds_config.json";
  write_json(config_file, c);
  const std::vector<std::string> argv =
      with_arg_mappings(with_config(opt_.command, config_file.string()), at_.arg_mappings, c);
  std::ofstream(dir / "cmd.txt") << shell_line(argv) << "\n";
  write_json(fs::path(at_.exps_dir) / (name + ".json"),
             Json{{"name", name}, {"ds_config", c}, {"num_gpus", profile_.local_world_size},
                  {"num_nodes", std::max(1, profile_.world_size / profile_.local_world_size)}});
  std::printf("ds-autotune: [%zu] %s (estimated %s per rank) ...", records_.size() + 1, name.c_str(),
              need ? format_bytes(need).c_str() : "?");
  std::fflush(stdout);
  const RunResult res = run_logged(argv, (dir / "stdout.log").string(), (dir / "stderr.log").string(), opt_.exp_timeout_s);
  r.seconds = res.seconds;
  const std::string probe_file = config.contains("autotuning") ? config["autotuning"].value("model_info_path", "")
                                                               : metric_file.string();
  std::ifstream in(probe_file);
  if (res.exit_code == 0 && in.good()) {
    try {
      r.metrics = Json::parse(in);
      r.metric = r.metrics.is_object() && r.metrics.contains(metric_key()) ? r.metrics[metric_key()].get<double>() : 0;
      r.ok = true;
    } catch (const nlohmann::json::exception& e) {
      r.why = std::string("unreadable result: ") + e.what();
    }
  } else if (res.interrupted) {
    r.why = "stopped: ds-autotune was interrupted";
  } else if (res.timed_out) {
    r.why = fmt::format("no result within {:.0f} s (--exp_timeout)", opt_.exp_timeout_s);
  } else if (res.exit_code == 0) {
    r.why = fmt::format("the program ended before global step {} without a result: give it more steps "
                        "(autotuning.end_profile_step)",
                        at_.end_profile_step);
  } else {
    const std::string err = tail_lines((dir / "stderr.log").string(), 1);
    r.why = fmt::format("exit code {}{}{}", res.exit_code, err.empty() ? "" : ": ", err);
  }
  if (r.ok && probe_file == metric_file.string())
    std::printf(" %.6g %s (%.1f s)\n", r.metric, metric_unit().c_str(), r.seconds);
  else if (r.ok)
    std::printf(" profiled (%.1f s)\n", r.seconds);
  else
    std::printf(" failed: %s\n", r.why.c_str());
  std::fflush(stdout);
  records_.push_back(r);
  if (interrupted()) throw Error("interrupted; the results so far are in " + at_.results_dir);
  return r;
}

ModelProfile Autotuner::profile(const Json& config, const std::string& name) {
  const std::string path = fs::absolute(fs::path(at_.results_dir) / name / "model_info.json").string();
  Json c = config;
  Json& a = c["autotuning"] = Json::object();
  a["enabled"] = true;
  a["model_info_path"] = path;
  a["model_info"]["profile"] = true;
  const Record r = run(name, "profile", c, 3, 1, 1, 0);
  records_.pop_back();  // not a candidate
  DS_CHECK(r.ok, Error,
           fmt::format("the model profile ({}: ZeRO stage 3, micro-batch 1) failed: {}; its output is in {}", name,
                       r.why, r.result_dir));
  return read_model_profile(r.metrics, path);
}

void Autotuner::tune_stage(int stage, int64_t& prev_max_micro) {
  const int64_t dp = profile_.data_parallel_size;
  int64_t cap = at_.max_train_micro_batch_size_per_gpu;
  if (at_.max_train_batch_size) cap = std::min<int64_t>(cap, *at_.max_train_batch_size / dp);
  const Json gas_given = user_.value("gradient_accumulation_steps", Json(1));  // "auto" or a list: 1 (DeepSpeed)
  const int64_t user_gas = gas_given.is_number_integer() ? std::max<int64_t>(1, gas_given.get<int64_t>()) : 1;
  const Json user_micro = user_.value("train_micro_batch_size_per_gpu", Json());
  int64_t stage_max = 0;  // the largest micro-batch an earlier (faster) variant of this stage fits
  for (const Variant& v : stage_variants(stage, user_, profile_.has_layer_list)) {
    const bool ckpt = v.checkpointing || profile_.checkpointing;
    const std::string space = v.name();
    Json at1 = experiment_config(base_, v, 1, 1, dp);
    int64_t max_micro = 0;
    try {
      max_micro = memory_.max_micro(at1, ckpt, cap);
    } catch (const Error& e) {  // a combination the engine refuses (it names the key)
      skipped_.push_back(fmt::format("{}: refused by the config checks: {}", space, e.what()));
      continue;
    }
    if (max_micro < at_.min_train_micro_batch_size_per_gpu) {
      const uint64_t need = memory_.need(at1, at_.min_train_micro_batch_size_per_gpu, ckpt);
      skipped_.push_back(fmt::format("{}: does not fit: micro-batch {} needs {} per rank, {} available", space,
                                     at_.min_train_micro_batch_size_per_gpu, format_bytes(need),
                                     format_bytes(memory_.budget)));
      if (!smallest_ || need < smallest_->first)
        smallest_ = {need, fmt::format("{} at micro-batch {}", space, at_.min_train_micro_batch_size_per_gpu)};
      continue;
    }
    // A slower variant is worth timing only if it fits a larger micro-batch (DeepSpeed's rule across stages).
    if (stage_max > 0 && max_micro <= stage_max) {
      skipped_.push_back(fmt::format("{}: fits no larger micro-batch than a faster variant ({})", space, stage_max));
      continue;
    }
    if (stage_max == 0 && max_micro < prev_max_micro) {
      skipped_.push_back(fmt::format("{}: fits micro-batch {} at most, below the {} of a lower stage", space, max_micro,
                                     prev_max_micro));
      return;
    }
    std::vector<int64_t> micros;
    int64_t per_rank_batch = at_.max_train_batch_size ? *at_.max_train_batch_size / dp : max_micro * user_gas;
    if (user_micro.is_array()) {  // the user's list replaces the search (DeepSpeed)
      for (const Json& m : user_micro)
        if (m.is_number_integer() && m.get<int64_t>() >= 1 && m.get<int64_t>() <= max_micro) micros.push_back(m.get<int64_t>());
      if (!micros.empty()) per_rank_batch = *std::max_element(micros.begin(), micros.end()) * user_gas;
    } else {
      micros = tuning_micro_batch_sizes(at_.min_train_micro_batch_size_per_gpu, max_micro,
                                        at_.num_tuning_micro_batch_sizes, per_rank_batch);
    }
    if (micros.empty()) {
      skipped_.push_back(fmt::format("{}: none of train_micro_batch_size_per_gpu {} fits (at most {})", space,
                                     user_micro.dump(), max_micro));
      continue;
    }
    for (int64_t micro : micros) {
      const int64_t gas = std::max<int64_t>(1, per_rank_batch / micro);
      const Json c = experiment_config(base_, v, micro, gas, dp);
      run(experiment_name(v, gas, micro), space, c, stage, micro, gas, memory_.need(c, micro, ckpt));
    }
    stage_max = max_micro;
  }
  prev_max_micro = std::max(prev_max_micro, stage_max);
}

void Autotuner::tune_knobs(int stage) {
  // The stage's best so far, from its micro-batch runs; the knobs are gridded at that point.
  const Record* seed = nullptr;
  for (const Record& r : records_)
    if (r.ok && r.stage == stage && (!seed || better(r.metric, seed->metric))) seed = &r;
  if (seed == nullptr || stage == 0) return;
  const Record at = *seed;
  std::vector<Json> grid = zero_knob_grid(stage, user_.value("zero_optimization", Json::object()));
  if (at_.tuner_type == AutotuningTuner::Random) std::shuffle(grid.begin(), grid.end(), std::mt19937(42));
  double best_metric = at.metric;
  int64_t since_better = 0, trials = 0;
  for (const Json& knobs : grid) {
    if (trials >= at_.tuner_num_trials || since_better >= at_.tuner_early_stopping) break;
    Json c = at.config;
    for (const auto& [key, value] : knobs.items()) c["zero_optimization"][key] = value;
    const std::string space = at.space + "_knobs";
    const Record r = run(at.name + "_" + knob_name(knobs), space, c, stage, at.micro, at.gas, at.need_bytes);
    ++trials;
    if (r.ok && better(r.metric, best_metric)) {
      best_metric = r.metric;
      since_better = 0;
    } else {
      ++since_better;
    }
  }
}

const Record* Autotuner::best(const std::string& space) const {
  const Record* b = nullptr;
  for (const Record& r : records_)
    if (r.ok && (space.empty() || r.space == space) && (!b || better(r.metric, b->metric))) b = &r;
  return b;
}

std::string Autotuner::tune() {
  started_ = now_s();
  install_interrupt_handlers();
  const uint64_t available = mem_available_bytes();
  std::printf("ds-autotune: %s, metric %s, %s mode; results in %s\n", opt_.config_path.c_str(), metric_key().c_str(),
              at_.fast ? "fast (stage and micro-batch)" : "full (and each stage's ZeRO knobs)", at_.results_dir.c_str());
  // DeepSpeed's DEFAULT_MIN_MEM_CONFIG: stage 3, micro-batch 1 (the user's offload and checkpointing kept).
  const Variant min_mem{3};
  Json profile_config = base_;
  min_mem.apply(profile_config);
  profile_config["train_micro_batch_size_per_gpu"] = 1;
  profile_config["gradient_accumulation_steps"] = 1;
  profile_ = profile(profile_config, "profile_model_info");
  memory_.profile = &profile_;
  memory_.budget = uint64_t(double(available) * opt_.memory_fraction / profile_.local_world_size);
  const uint64_t profiled_states = memory_.states(profile_config);
  memory_.overhead = profile_.rss_before_forward > profiled_states ? profile_.rss_before_forward - profiled_states : 0;
  if (profile_.has_layer_list && !profile_.checkpointing) {
    Json ckpt = profile_config;
    Variant{3, false, false, true}.apply(ckpt);
    memory_.checkpointed_activation_bytes = profile(ckpt, "profile_model_info_ckpt").activation_bytes;
  }
  std::printf("ds-autotune: %.4gM parameters; activations %s per sample%s; %s of RAM per rank (%d local ranks); "
              "%d data-parallel ranks\n",
              double(profile_.num_params) / 1e6,
              format_bytes(uint64_t(profile_.activation_bytes / profile_.micro_batch_size)).c_str(),
              memory_.checkpointed_activation_bytes
                  ? fmt::format(" ({} with activation checkpointing)",
                                format_bytes(uint64_t(*memory_.checkpointed_activation_bytes / profile_.micro_batch_size)))
                        .c_str()
                  : "",
              format_bytes(memory_.budget).c_str(), profile_.local_world_size, profile_.data_parallel_size);
  int64_t prev_max_micro = 0;
  try {
    for (int stage : requested_stages(user_)) {
      tune_stage(stage, prev_max_micro);
      if (!at_.fast) tune_knobs(stage);
    }
  } catch (const Error&) {  // interrupted: what ran is still summarized
    write_results();
    throw;
  }
  for (const std::string& s : skipped_) std::printf("ds-autotune: skipped %s\n", s.c_str());
  write_results();
  const Record* b = best();
  if (b == nullptr) {
    if (records_.empty() && smallest_)
      throw Error(fmt::format("nothing fits: the smallest candidate, {}, needs {} per rank; this host has {} available "
                              "for each of its {} ranks (x{} planning margin). Add ranks or RAM, or allow offload",
                              smallest_->second, format_bytes(smallest_->first),
                              format_bytes(uint64_t(double(available) / profile_.local_world_size)),
                              profile_.local_world_size, opt_.memory_fraction));
    throw Error(fmt::format("no experiment produced a result; the first failure: {}: {} (see {})",
                            records_.empty() ? "-" : records_.front().name,
                            records_.empty() ? "nothing was run" : records_.front().why, at_.results_dir));
  }
  return (fs::path(at_.results_dir) / "ds_config_optimal.json").string();
}

void Autotuner::write_results() {
  const fs::path dir(at_.results_dir);
  const Record* global = best();
  std::vector<std::string> spaces;
  for (const Record& r : records_)
    if (std::find(spaces.begin(), spaces.end(), r.space) == spaces.end()) spaces.push_back(r.space);
  // DeepSpeed's summary table (tabulate's "pipe" format), then every experiment.
  std::ostringstream s;
  s << fmt::format("| {:<16} | {:>15} | {:>15} | {:<40} |\n", "tuning_space", "num_experiments", "best_metric_val",
                   "best_exp_name");
  s << fmt::format("|:{:-<16}-|-{:->15}:|-{:->15}:|:{:-<40}-|\n", "", "", "", "");
  for (const std::string& sp : spaces) {
    const Record* b = best(sp);
    const auto n = std::count_if(records_.begin(), records_.end(), [&](const Record& r) { return r.space == sp; });
    s << fmt::format("| {:<16} | {:>15} | {:>15.6g} | {:<40} |\n", sp, n, b ? b->metric : 0.0, b ? b->name : "-");
  }
  s << fmt::format("| {:<16} | {:>15} | {:>15.6g} | {:<40} |\n", "global", records_.size(), global ? global->metric : 0.0,
                   global ? global->name : "-");
  s << fmt::format("\n\nTuning completed in {}. Total number of experiments: {}.\n", duration(now_s() - started_),
                   records_.size());
  s << fmt::format("\nmetric: {} ({}); every experiment:\n", metric_key(), metric_unit());
  s << fmt::format("| {:<40} | {:>5} | {:>5} | {:>4} | {:>10} | {:>12} | {:>7} | {} |\n", "experiment", "stage", "micro",
                   "gas", "estimated", "metric", "seconds", "result");
  for (const Record& r : records_)
    s << fmt::format("| {:<40} | {:>5} | {:>5} | {:>4} | {:>10} | {:>12.6g} | {:>7.1f} | {} |\n", r.name, r.stage,
                     r.micro, r.gas, format_bytes(r.need_bytes), r.ok ? r.metric : 0.0, r.seconds,
                     r.ok ? (&r == global ? "best" : "ok") : r.why);
  for (const std::string& sk : skipped_) s << "skipped " << sk << "\n";
  std::ofstream(dir / "summary.txt") << s.str();
  std::printf("\n%s", s.str().c_str());
  if (global == nullptr) return;
  Json optimal = global->config;
  optimal.erase("autotuning");
  write_json(dir / "ds_config_optimal.json", optimal);
  optimal_cmd_ = with_arg_mappings(with_config(opt_.command, fs::absolute(dir / "ds_config_optimal.json").string()),
                                   at_.arg_mappings, global->config);
  std::ofstream(dir / "cmd_optimal.txt") << shell_line(optimal_cmd_) << "\n";
  std::printf("ds-autotune: %s is the optimal setup (%.6g %s); wrote %s and %s\n", global->name.c_str(),
              global->metric, metric_unit().c_str(), (dir / "ds_config_optimal.json").c_str(),
              (dir / "cmd_optimal.txt").c_str());
}

}  // namespace ds::autotune
