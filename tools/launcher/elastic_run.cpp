// The elastic loop (see elastic_run.h): probe, choose, launch, watch for returning hosts, repeat.
#include "launcher/elastic_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "launcher/child_process.h"
#include "launcher/elastic_plan.h"
#include "launcher/host_probe.h"
#include "util/error.h"

namespace ds::launcher {
namespace {

constexpr double kProbeTimeoutS = 10;

void say(const std::string& line) {
  std::fprintf(stderr, "ds-run: elastic: %s\n", line.c_str());
  std::fflush(stderr);
}

// The hosts of `pool` that answer now, in pool order.
ActiveResources alive_hosts(const ActiveResources& pool, const std::vector<std::string>& agent,
                            const MachineFacts& machine) {
  ActiveResources alive;
  for (const HostSlots& h : pool)
    if (host_reachable(h.host, agent, machine.local_names, kProbeTimeoutS)) alive.push_back(h);
  return alive;
}

std::string describe(const ElasticChoice& c, int64_t per_replica) {
  const ElasticBatch& b = c.batch;
  return fmt::format("{} rank(s) on {} (valid data-parallel sizes [{}]; batch {} = micro {} x GAS {} x {}{})", c.world,
                     host_names(c.resources), format_world_sizes(b.valid_world_sizes), b.train_batch_size,
                     b.micro_batch_size, b.gradient_accumulation_steps, c.world / per_replica,
                     per_replica > 1 ? fmt::format(" data-parallel ranks of {}", per_replica) : "");
}

// Watches the hosts outside the running job; when enough come back for a larger valid world, asks
// the job to stop at its next step boundary. stop() ends the watch.
class ReturnWatcher {
 public:
  ReturnWatcher(const ActiveResources& pool, const ElasticChoice& running, const ElasticJob& job,
                const ElasticOptions& options, const std::vector<std::string>& agent, const MachineFacts& machine)
      : thread_([=, this] { watch(pool, running, job, options, agent, machine); }) {}
  ~ReturnWatcher() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);  // the watcher waits on the flag under the lock
      done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool asked_to_grow() const { return grow_; }

 private:
  void watch(ActiveResources pool, ElasticChoice running, ElasticJob job, ElasticOptions options,
             std::vector<std::string> agent, MachineFacts machine) {
    auto in_job = [&](const std::string& host) {
      return std::any_of(running.resources.begin(), running.resources.end(),
                         [&](const HostSlots& h) { return h.host == host; });
    };
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (wake_.wait_for(lock, std::chrono::duration<double>(options.probe_interval_s), [&] { return done_.load(); })) return;
      }
      ActiveResources candidates, back;
      for (const HostSlots& h : pool) {
        if (in_job(h.host)) {
          candidates.push_back(h);
        } else if (host_reachable(h.host, agent, machine.local_names, kProbeTimeoutS)) {
          candidates.push_back(h);
          back.push_back(h);
        }
        if (done_) return;
      }
      if (back.empty()) continue;
      ElasticChoice bigger;
      try {
        bigger = choose_elastic_world(candidates, job, options.min_nodes, options.max_nodes);
      } catch (const Error&) {
        continue;
      }
      if (bigger.world <= running.world) continue;
      say(fmt::format("{} reachable; stopping the job at its next step boundary to restart with {} ranks",
                      host_names(back), bigger.world));
      grow_ = true;
      stop_child_gracefully();
      return;
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> done_{false};
  std::atomic<bool> grow_{false};
  std::thread thread_;
};

}  // namespace

std::string find_config_argument(const std::vector<std::string>& program) {
  for (size_t i = 0; i < program.size(); ++i)
    for (const char* flag : {"--deepspeed_config", "--ds_config", "--config"}) {
      const std::string f = flag;
      if (program[i] == f && i + 1 < program.size()) return program[i + 1];
      if (program[i].rfind(f + "=", 0) == 0) return program[i].substr(f.size() + 1);
    }
  return "";
}

int run_elastic(const LaunchRequest& request, const MachineFacts& machine, const ElasticOptions& options,
                const LaunchFn& launch) {
  DS_CHECK(!options.config_path.empty(), Error,
           "--elastic_training: no DeepSpeed config found in the program's arguments (--deepspeed_config, "
           "--ds_config or --config); name it with --elastic_config PATH");
  const std::optional<ElasticJob> job = read_elastic_job(options.config_path);
  DS_CHECK(job.has_value(), Error,
           "--elastic_training: " + options.config_path + " has no \"elasticity\" section with \"enabled\": true");
  DS_CHECK(request.num_nodes <= 0, Error,
           "--num_nodes does not combine with --elastic_training: bound the hosts with --min_elastic_nodes and "
           "--max_elastic_nodes");
  // Every host and slot the user allows (hostfile, --include/--exclude, --num_gpus).
  const ActiveResources pool = plan_launch(request, machine).active;
  const bool on_hostfile = !(pool.size() == 1 && is_local_host(pool.front().host, machine.local_names)) ||
                           request.hostfile_given;
  const std::vector<std::string> agent = rsh_agent(split_launcher_args(request.launcher_args), machine.environment);
  const std::string section = nlohmann::json(nlohmann::json::object({
      {"max_train_batch_size", job->elasticity.max_train_batch_size},
      {"micro_batch_sizes", job->elasticity.micro_batch_sizes},
      {"version", job->elasticity.version}})).dump();

  int restarts = 0;
  for (int start = 0;; ++start) {
    const ActiveResources alive = alive_hosts(pool, agent, machine);
    const ElasticChoice choice = choose_elastic_world(alive, *job, options.min_nodes, options.max_nodes);
    say(fmt::format("{} {}", start == 0 ? "starting" : "restarting with", describe(choice, job->ranks_per_replica)));
    LaunchRequest attempt = request;
    attempt.exclude.clear();
    attempt.num_nodes = -1;
    if (on_hostfile) {
      attempt.include = include_spec(choice.resources);
      attempt.num_gpus = -1;
    } else {
      attempt.include.clear();
      attempt.num_gpus = static_cast<int>(choice.world);
    }
    LaunchPlan plan = plan_launch(attempt, machine);
    plan.mpirun.forward_values.push_back({"DEEPSPEED_ELASTICITY_CONFIG", section});
    plan.mpirun.forward_values.push_back({"DS_ELASTIC_RESTART_COUNT", std::to_string(start)});
    ReturnWatcher watcher(pool, choice, *job, options, agent, machine);
    const LaunchOutcome end = launch(plan);
    watcher.stop();
    if (end.user_signal != 0) return end.code;  // the user's stop: no restart
    if (watcher.asked_to_grow()) continue;       // stopped at a boundary (or failed while stopping): grow
    if (end.code == 0) return 0;
    if (++restarts > options.max_restarts) {
      say(fmt::format("the job failed (exit code {}) and --max_restarts {} are used up", end.code, options.max_restarts));
      return end.code;
    }
    say(fmt::format("the job failed (exit code {}); restart {} of {} from the latest checkpoint", end.code, restarts,
                    options.max_restarts));
  }
}

}  // namespace ds::launcher
