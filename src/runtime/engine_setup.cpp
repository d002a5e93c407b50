// Engine construction: which features this build runs, where parameters live, the flat buffers,
// the optimizer, and the memory budget checked before anything large is allocated.
#include <fmt/format.h>

#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "runtime/engine.h"
#include "runtime/world.h"
#include "util/error.h"
#include "util/logging.h"
#include "util/system_info.h"

namespace ds {
namespace {

// Features the config can ask for that later issues build; refusing them is better than
// training something other than what the config says.
void reject_unbuilt_features(const Config& c) {
  auto refuse = [](const std::string& path, const std::string& what) {
    throw NotSupported(path + ": " + what +
                       " is not implemented in deepspeed.cpp yet; remove it from the config or "
                       "set it to its default");
  };
  if (c.fp16.enabled) refuse("fp16.enabled", "fp16 mixed precision");
  if (c.bf16.enabled) refuse("bf16.enabled", "bf16 mixed precision");
  if (c.zero_optimization.stage != 0)
    refuse("zero_optimization.stage", fmt::format("ZeRO stage {}", c.zero_optimization.stage));
  if (c.optimizer) {
    auto t = c.optimizer->type;
    if (t != OptimizerType::Adam && t != OptimizerType::AdamW)
      refuse("optimizer.type", fmt::format("optimizer \"{}\"", to_string(t)));
  }
  if (c.scheduler) refuse("scheduler.type", fmt::format("LR scheduler \"{}\"", to_string(c.scheduler->type)));
}

// LibTorch 1.13 sizes its intra-op pool from physical cores as cpuinfo sees them, which on many
// VMs is 1 (two vCPUs look like one core's hyperthreads). Unless the user set OMP_NUM_THREADS, give
// each local rank its share of the online CPUs.
void configure_cpu_threads() {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  const int share = std::max(1, cpu_cores() / std::max(1, local_world_size()));
  if (torch::get_num_threads() < share) {
    torch::set_num_threads(share);
    log::info("intra-op threads: {} (set OMP_NUM_THREADS to choose another count)", share);
  }
}

torch::Device pick_device() {
  if (torch::cuda::is_available()) return torch::Device(torch::kCUDA, local_rank() % torch::cuda::device_count());
  return torch::kCPU;
}

}  // namespace

void Engine::setup_parameters(const std::vector<ParamGroup>& groups) {
  reject_unbuilt_features(config_);
  const int ws = detect_world_size();
  DS_CHECK(ws == 1, NotSupported,
           fmt::format("launched with world size {} but this build has no multi-process "
                       "communication backend yet; run one process",
                       ws));
  device_ = pick_device();
  if (device_.is_cpu()) configure_cpu_threads();
  module_->to(device_);

  // Trainable parameters in model order, each distinct tensor once (shared ones under the first name).
  std::unordered_map<std::string, int> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& name : groups[g].params) {
      if (!group_of.emplace(name, static_cast<int>(g)).second)
        throw ConfigError("param_groups", fmt::format("parameter '{}' is listed in more than one group", name));
    }
  }
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
  for (const auto& np : named) {
    DS_CHECK(np.param.scalar_type() == torch::kFloat32, NotSupported,
             fmt::format("parameter '{}' is {}; this build trains fp32 parameters only", np.name,
                         c10::toString(np.param.scalar_type())));
  }

  check_memory_budget();  // before the flat buffers double anything
  flat_ = std::make_unique<zero::FlatParameters>(zero::FlatParameters::build(named, {}));
  ledger_.add(Tier::Device, MemKind::Params, flat_->param_bytes());
  ledger_.add(Tier::Device, MemKind::Grads, flat_->grad_bytes());
  for (const auto& b : module_->buffers(true)) ledger_.add(Tier::Device, MemKind::Buffers, b.numel() * b.element_size());
}

void Engine::setup_optimizer(const std::vector<ParamGroup>& groups) {
  if (!config_.optimizer) return;
  const auto& p = config_.optimizer->params;
  zero::FlatAdamOptions o;
  o.defaults.lr = p.lr;
  o.defaults.beta1 = p.betas[0];
  o.defaults.beta2 = p.betas[1];
  o.defaults.eps = p.eps;
  o.defaults.weight_decay = p.weight_decay;
  o.defaults.adamw_mode = config_.optimizer->decoupled_weight_decay();
  o.defaults.bias_correction = p.bias_correction;
  for (const auto& g : groups) o.groups.push_back({g.lr, g.weight_decay});
  optimizer_ = std::make_unique<zero::FlatAdamOptimizer>(*flat_, std::move(o), ledger_, Tier::Device);
}

void Engine::check_memory_budget() const {
  if (!device_.is_cpu()) return;  // accelerator budgets arrive with the CUDA build
  int64_t numel = 0;
  for (const auto& p : module_->parameters(true))
    if (p.requires_grad()) numel += p.numel();
  // Still to allocate: the flat copy of the parameters (transient), gradients, Adam's two moments.
  const uint64_t need = static_cast<uint64_t>(numel) * 4 * (1 + 1 + (config_.optimizer ? 2 : 0));
  const uint64_t avail = mem_available_bytes();
  DS_CHECK(avail == 0 || need <= avail, OutOfMemory,
           fmt::format("the model has {} trainable parameters; the engine needs {} more for flat "
                       "parameters, gradients and optimizer state, but only {} of RAM is available. "
                       "Use a smaller model (or, once available, ZeRO offload)",
                       numel, format_bytes(need), format_bytes(avail)));
}

}  // namespace ds
