// Engine construction: which features this build runs, the dtype plan, where parameters live, the
// flat buffers, optimizer, schedule and loss scaler, and the memory budget checked before anything
// large is allocated.
#include <fmt/format.h>

#include <sched.h>

#include <cstdlib>
#include <numeric>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "comm/comm.h"
#include "config/support.h"
#include "zero/collectives.h"
#include "zero/memory_estimate.h"
#include "runtime/dtype_policy.h"
#include "runtime/engine.h"
#include "runtime/output_paths.h"
#include "runtime/world.h"
#include "util/error.h"
#include "util/logging.h"
#include "util/system_info.h"
#include "aio/nvme_path.h"
#include "offload/host_memory.h"
#include "offload/huge_pages.h"

namespace ds {
namespace {

// LibTorch 1.13 sizes its intra-op pool from physical cores as cpuinfo sees them, which on many
// VMs is 1 (two vCPUs look like one core's hyperthreads). Unless the user set OMP_NUM_THREADS, give
// each local rank its share of the online CPUs.
// DS_BIND_CORES_TO_RANK=1 (our launcher-free form of DeepSpeed's `--bind_cores_to_rank`): each local
// rank's process, and so its OpenMP and intra-op threads, runs only on its own slice of the cores,
// so ranks sharing a machine do not migrate onto each other's cores.
void bind_cores_to_rank(int share) {
  const char* v = std::getenv("DS_BIND_CORES_TO_RANK");
  if (v == nullptr || std::string(v) == "0") return;
  const int first = (local_rank() * share) % std::max(1, cpu_cores());
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = first; c < first + share && c < cpu_cores(); ++c) CPU_SET(c, &set);
  DS_CHECK(sched_setaffinity(0, sizeof set, &set) == 0, Error,
           fmt::format("DS_BIND_CORES_TO_RANK: cannot bind local rank {} to cores {}-{}", local_rank(), first,
                       first + share - 1));
  log::info("DS_BIND_CORES_TO_RANK: local rank {} bound to cores {}-{}", local_rank(), first, first + share - 1);
}

void configure_cpu_threads() {
  const int share = std::max(1, cpu_cores() / std::max(1, local_world_size()));
  bind_cores_to_rank(share);
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  if (torch::get_num_threads() < share) {
    torch::set_num_threads(share);
    log::info("intra-op threads: {} (set OMP_NUM_THREADS to choose another count)", share);
  }
}

torch::Device pick_device() {
  if (torch::cuda::is_available()) return torch::Device(torch::kCUDA, local_rank() % torch::cuda::device_count());
  return torch::kCPU;
}

precision::ScalerFlavor scaler_flavor(const Config& c) {
  if (c.zero_optimization.stage > 0) return precision::ScalerFlavor::Zero;
  // DeepSpeed: FP16_Optimizer for fused bases (Adam/AdamW), FP16_UnfusedOptimizer otherwise.
  const bool fused = !c.optimizer || c.optimizer->type == OptimizerType::Adam || c.optimizer->type == OptimizerType::AdamW;
  return fused ? precision::ScalerFlavor::FusedFp16 : precision::ScalerFlavor::UnfusedFp16;
}

}  // namespace

Engine::Engine(std::shared_ptr<torch::nn::Module> module, Config config, std::vector<ParamGroup> groups,
               nn::LayerList* layers)
    : module_(std::move(module)), config_(std::move(config)), layers_(layers),
      step_guard_(config_.fp16, config_.nan_guard) {
  DS_CHECK(module_ != nullptr, Error, "ds::initialize: model is null");
  comm_ = comm::make_communicator(comm::Backend::Auto);
  log::set_rank(comm_->rank());
  if (config_.world_size != world_size())
    throw ConfigError("train_batch_size",
                      fmt::format("the batch triple was resolved for world size {} but {} ranks are running; "
                                  "load the config with the launcher's world size (ds::initialize does)",
                                  config_.world_size, world_size()));
  check_output_paths(config_, *comm_);  // monitor folders, profiler file: writable, or fail now
  monitor_ = MonitorMaster(monitor_options(config_, comm_->rank()));  // a bad output_path fails here
  setup_parameters(groups);
  setup_optimizer(groups);
  states_->reset_param_swap_stats();  // the optimizer's initial reads of the parameters are not training traffic
  setup_schedule();
  scaler_ = config_.fp16.enabled ? precision::make_loss_scaler(config_.fp16, scaler_flavor(config_))
                                 : precision::make_unit_loss_scaler();
  log::info("engine ready (rank {} of {}, {} backend, ZeRO stage {}): {} trainable parameters in {} group(s) on {}; batch {} = micro {} x GAS {} x world {}",
            rank(), world_size(), comm::to_string(comm_->backend()), states_->stage(), states_->numel(), states_->num_groups(), device_.str(), config_.train_batch_size,
            config_.train_micro_batch_size_per_gpu, config_.gradient_accumulation_steps, world_size());
  log::info("{}", plan_.table());
  if (config_.flops_profiler.enabled && rank() == 0) flops_profiler_ = std::make_unique<profiling::FlopsProfiler>(*module_);
  // Activation checkpointing wraps the LayerList's walk (docs/activation_checkpointing.md); it
  // composes with stage 3's hooks, which gather a segment's parameters before its recompute.
  if (nn::activation_checkpointing_requested(config_)) {
    if (layers_ != nullptr)
      activation_checkpointing_ = nn::apply_activation_checkpointing(*layers_, *module_, config_.activation_checkpointing);
    else
      log::warn("activation_checkpointing: the model exposes no LayerList (layers()), so the section has no effect");
  }
  if (config_.steps_per_print) log_progress();
}

void Engine::setup_parameters(const std::vector<ParamGroup>& groups) {
  // What this build cannot run: the loader refused it already; configs built in code meet it here.
  check_engine_support(config_);
  device_ = pick_device();
  if (device_.is_cpu()) {
    configure_cpu_threads();
    if (auto line = offload::enable_huge_pages_for_cpu_tensors(); !line.empty()) log::info("{}", line);
  }
  plan_ = resolve_dtype_plan(config_, device_);

  // Trainable parameters in model order, each distinct tensor once (shared ones under the first name).
  std::unordered_map<std::string, int> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& name : groups[g].params) {
      if (!group_of.emplace(name, static_cast<int>(g)).second)
        throw ConfigError("param_groups", fmt::format("parameter '{}' is listed in more than one group", name));
    }
  }
  check_memory_budget();  // before anything is cast or copied
  // The module computes in plan_.compute; PrecisionBuffers keeps the model-dtype storage.
  module_->to(device_, plan_.compute);
  std::vector<zero::NamedParam> named;
  std::unordered_set<const void*> seen;
  std::unordered_set<std::string> found;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    const torch::Tensor& p = item.value();
    found.insert(item.key());
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    if (!p.requires_grad()) {
      ledger_.add(Tier::Device, MemKind::Params, p.numel() * p.element_size());
      continue;
    }
    int g = 0;
    if (!groups.empty()) {
      auto it = group_of.find(item.key());
      if (it == group_of.end())
        throw ConfigError("param_groups", fmt::format("trainable parameter '{}' is in no group (every "
                                                      "trainable parameter must be in exactly one)",
                                                      item.key()));
      g = it->second;
    }
    named.push_back({item.key(), p, g});
  }
  for (const auto& [name, g] : group_of) {
    if (!found.count(name))
      throw ConfigError("param_groups",
                        fmt::format("group {} names '{}', which is not a parameter of the model", g, name));
  }
  DS_CHECK(!named.empty(), Error, "the model has no trainable parameters");

  zero::ModelStatesOptions options;
  options.config = &config_;
  options.plan = plan_;
  options.comm = comm_.get();
  options.ledger = &ledger_;
  options.tier = Tier::Device;
  options.module = module_.get();
  options.layers = layers_;
  if (config_.zero_optimization.offload_optimizer_enabled()) {
    options.offload_gradients = true;
    int64_t numel = 0;
    for (const auto& np : named) numel += np.param.numel();
    // Host bytes per rank: fp32 gradients, master and optimizer state of the partition.
    const uint64_t host_bytes = static_cast<uint64_t>(numel) * 16u / static_cast<uint64_t>(world_size());
    options.host = offload::plan_host_memory(config_.zero_optimization.offload_optimizer.pin_memory, !device_.is_cpu(),
                                             host_bytes, memlock_limit_bytes());
    if (!options.host.note.empty()) {  // a warning where pinning could have worked; else a fact
      if (device_.is_cpu()) log::info("zero_optimization.offload_optimizer.{}", options.host.note);
      else log::warn("zero_optimization.offload_optimizer.{}", options.host.note);
    }
    host_ = options.host;
    // Overlap the CPU step with backward where nothing step-wide is needed first (docs/offload.md).
    std::string why_not;
    if (config_.zero_optimization.stage < 2) why_not = "stage 1 reduces gradients only at the boundary";
    else if (config_.gradient_clipping > 0) why_not = "gradient_clipping needs the global norm of every gradient first";
    else if (config_.fp16.enabled) why_not = "fp16 checks every gradient for overflow first (and skips the step if one did)";
    else if (!config_.optimizer) why_not = "no optimizer";
    else if (config_.zero_optimization.offload_optimizer.device == OffloadDevice::Nvme)
      why_not = "NVMe swapping streams the sub-groups through its buffers in order";
    overlap_step_ = why_not.empty();
    if (overlap_step_) {
      options.sub_group_steps = config_.zero_optimization.sub_group_size;
      log::info("ZeRO-Offload: each optimizer sub-group ({} elements) steps on the CPU as soon as its gradients are "
                "reduced, overlapping the rest of backward",
                config_.zero_optimization.sub_group_size);
    } else {
      log::info("ZeRO-Offload: the CPU step runs after backward ({})", why_not);
    }
  }
  states_ = zero::make_model_states(options, named);  // broadcasts rank 0's parameters
  torch::NoGradGuard no_grad;
  for (auto& b : module_->buffers(true)) {
    ledger_.add(Tier::Device, MemKind::Buffers, b.numel() * b.element_size());
    if (b.is_contiguous()) zero::broadcast_from_rank0(*comm_, b, "broadcast_buffers");  // views follow their base
  }
}

void Engine::setup_optimizer(const std::vector<ParamGroup>& groups) {
  if (!config_.optimizer) return;
  std::vector<zero::GroupHyperparams> overrides;
  for (const auto& g : groups) overrides.push_back({g.lr, g.weight_decay});
  std::vector<zero::FlatGroup> layout;
  std::vector<torch::Tensor> storage;
  const bool nvme = config_.zero_optimization.offload_optimizer.device == OffloadDevice::Nvme;
  // Parameters on NVMe and optimizer on NVMe: the master is initialised sub-group by sub-group
  // from the parameter files (read_params below), never the whole partition in RAM.
  const bool streamed_init = nvme && states_->params_on_nvme();
  for (size_t g = 0; g < states_->num_groups(); ++g) {
    layout.push_back(states_->local_layout(g));
    storage.push_back(streamed_init ? torch::Tensor() : states_->local_params(g));
  }
  // Stage 0 calls the kernel per tensor, ZeRO per partition, as DeepSpeed does (decides beta^t
  // rounding, reference §19).
  const auto calls = states_->stage() == 0 ? zero::KernelCalls::PerTensor : zero::KernelCalls::PerPartition;
  // ZeRO-Offload: master and state in host buffers, stepped by the CPU kernels sub-group by sub-group.
  const bool offload = config_.zero_optimization.offload_optimizer_enabled();
  zero::MasterPlacement placement;
  placement.alias_fp32 = !offload;
  placement.pinned = offload && host_.pinned;
  placement.sub_group_size = (offload && states_->stage() == 3) || nvme ? config_.zero_optimization.sub_group_size : 0;
  if (nvme) {
    placement.nvme = &config_.zero_optimization.offload_optimizer;
    placement.aio = config_.aio;
    placement.zero_stage = states_->stage();
    placement.rank = rank();
    if (streamed_init)
      placement.read_params = [this](size_t g, int64_t offset, int64_t numel) {
        return states_->local_params_range(g, offset, numel);
      };
  }
  optimizer_ = std::make_unique<zero::FlatOptimizer>(*config_.optimizer, overrides, layout, storage, ledger_,
                                                     offload ? Tier::Cpu : Tier::Device, calls, placement);
}

void Engine::setup_schedule() {
  if (!config_.scheduler) return;
  if (!optimizer_)
    throw ConfigError("scheduler", "an LR schedule needs an optimizer; add an \"optimizer\" section");
  std::vector<optim::GroupLr> base;
  const auto lrs = optimizer_->lrs();
  const auto betas = optimizer_->betas();
  for (size_t g = 0; g < lrs.size(); ++g) base.push_back({lrs[g], betas[g]});
  scheduler_ = optim::LrScheduler::create(*config_.scheduler, std::move(base), optim::has_betas(config_.optimizer->type));
  apply_schedule();  // construction sets the initial lr (e.g. warmup_min_lr), as DeepSpeed's does
}

void Engine::check_memory_budget() const {
  if (!device_.is_cpu()) return;  // accelerator budgets arrive with the CUDA build
  // What this rank's model states will take (zero/memory_estimate.h: the layout rules of the
  // stage), times the ranks on this machine; every tier is this machine's RAM on a CPU build.
  zero::EstimateInput in;
  std::unordered_set<const void*> seen;
  for (const auto& p : module_->parameters(true))
    if (p.requires_grad() && seen.insert(p.unsafeGetTensorImpl()).second) in.param_numels.push_back(p.numel());
  in.world = world_size();
  in.plan = plan_;
  in.config = &config_;
  const MemoryLedger estimate = zero::estimate_model_states(in);
  const uint64_t per_rank = estimate.total() - estimate.tier_total(Tier::Nvme);
  const int ranks = std::max(1, local_world_size());
  check_nvme_budget(estimate, ranks);
  const uint64_t need = per_rank * static_cast<uint64_t>(ranks);
  const uint64_t avail = mem_available_bytes();
  DS_CHECK(avail == 0 || need <= avail, OutOfMemory,
           fmt::format("the model has {} trainable parameters; at ZeRO stage {} each of the {} rank(s) on this machine "
                       "needs {} of RAM for parameters, gradients, master weights, optimizer state and swap buffers "
                       "({} in all), but only {} is available. Use a smaller model, a higher zero_optimization.stage, "
                       "offload to NVMe or more machines (`ds-estimate` prints the numbers per stage)",
                       std::accumulate(in.param_numels.begin(), in.param_numels.end(), int64_t{0}),
                       config_.zero_optimization.stage, ranks, format_bytes(per_rank), format_bytes(need),
                       format_bytes(avail)));
}

void Engine::check_nvme_budget(const MemoryLedger& estimate, int ranks) const {
  // Every rank on this machine writes its swap files to the same disk(s): check them all at once,
  // before anything is written (the swappers check again for their own files).
  const auto& z = config_.zero_optimization;
  const bool params = z.offload_param.device == OffloadDevice::Nvme, optim = z.offload_optimizer.device == OffloadDevice::Nvme;
  if (!params && !optim) return;
  const uint64_t param_bytes = estimate.bytes(Tier::Nvme, MemKind::Params) * uint64_t(ranks);
  const uint64_t optim_bytes = (estimate.tier_total(Tier::Nvme) - estimate.bytes(Tier::Nvme, MemKind::Params)) * uint64_t(ranks);
  const std::string pkey = "zero_optimization.offload_param.nvme_path", okey = "zero_optimization.offload_optimizer.nvme_path";
  if (params) aio::validate_nvme_path(*z.offload_param.nvme_path, pkey);
  if (optim) aio::validate_nvme_path(*z.offload_optimizer.nvme_path, okey);
  if (params && optim && aio::same_file_system(*z.offload_param.nvme_path, *z.offload_optimizer.nvme_path)) {
    aio::check_free_space(*z.offload_optimizer.nvme_path, param_bytes + optim_bytes, okey + " (with " + pkey + ")");
    return;
  }
  if (params) aio::check_free_space(*z.offload_param.nvme_path, param_bytes, pkey);
  if (optim) aio::check_free_space(*z.offload_optimizer.nvme_path, optim_bytes, okey);
}

}  // namespace ds
