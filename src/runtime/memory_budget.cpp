#include "runtime/memory_budget.h"

#include <fmt/format.h>

#include <numeric>
#include <unordered_set>

#include "aio/nvme_path.h"
#include "config/zero_plan.h"
#include "runtime/world.h"
#include "util/error.h"
#include "util/system_info.h"
#include "zero/memory_estimate.h"

namespace ds {
namespace {

void check_nvme_budget(const Config& c, const MemoryLedger& estimate, int ranks) {
  // Every rank on this machine writes its swap files to the same disk(s): check them all at once,
  // before anything is written (the swappers check again for their own files).
  const auto& z = c.zero_optimization;
  const zero::ZeroPlan plan = zero::resolve_zero_plan(c);
  const bool params = plan.params == zero::Placement::Nvme, optim = plan.optimizer == zero::Placement::Nvme;
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

}  // namespace

void check_memory_budget(torch::nn::Module& module, const BudgetInput& budget) {
  if (!budget.device.is_cpu()) return;  // accelerator budgets arrive with the CUDA build
  // What this rank's model states will take, times the ranks on this machine; every tier is this
  // machine's RAM on a CPU build.
  zero::EstimateInput in;
  std::unordered_set<const void*> seen;
  for (const auto& p : module.parameters(true))
    if (p.requires_grad() && seen.insert(p.unsafeGetTensorImpl()).second) in.param_numels.push_back(p.numel());
  in.world = budget.world;
  in.plan = budget.dtypes;
  in.config = budget.config;
  const MemoryLedger estimate = zero::estimate_model_states(in);
  const uint64_t per_rank = estimate.total() - estimate.tier_total(Tier::Nvme);
  const int ranks = std::max(1, local_world_size());
  check_nvme_budget(*budget.config, estimate, ranks);
  const uint64_t need = per_rank * static_cast<uint64_t>(ranks);
  const uint64_t avail = mem_available_bytes();
  DS_CHECK(avail == 0 || need <= avail, OutOfMemory,
           fmt::format("the model has {} trainable parameters; at ZeRO stage {} each of the {} rank(s) on this machine "
                       "needs {} of RAM for parameters, gradients, master weights, optimizer state and swap buffers "
                       "({} in all), but only {} is available. Use a smaller model, a higher zero_optimization.stage, "
                       "offload to NVMe or more machines (`ds-estimate` prints the numbers per stage)",
                       std::accumulate(in.param_numels.begin(), in.param_numels.end(), int64_t{0}),
                       zero::resolve_zero_plan(*budget.config).stage, ranks, format_bytes(per_rank), format_bytes(need),
                       format_bytes(avail)));
}

}  // namespace ds
