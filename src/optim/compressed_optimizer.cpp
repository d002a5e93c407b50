#include "optim/compressed_optimizer.h"

#include "optim/onebit_adam.h"
#include "optim/onebit_lamb.h"
#include "optim/zero_one_adam.h"
#include "util/error.h"

namespace ds::optim {

bool CompressedOptimizer::load_errors(std::span<const float> saved) {
  if (exchange().set_errors(saved)) return true;
  exchange().reset_errors();
  return false;
}

std::vector<int64_t> param_numels(const std::vector<std::vector<ParamSpan>>& params) {
  std::vector<int64_t> n;
  for (const auto& g : params)
    for (const auto& s : g) n.push_back(s.numel);
  return n;
}

std::vector<std::string> compressed_state_names(OptimizerType type) {
  if (type == OptimizerType::OneBitLamb) return {"exp_avg", "exp_avg_sq", "exp_avg_sq_fresh"};
  return {"exp_avg", "exp_avg_sq"};
}

std::unique_ptr<CompressedOptimizer> make_compressed_optimizer(const OptimizerConfig& config, comm::Communicator& comm,
                                                               const std::vector<std::vector<ParamSpan>>& params) {
  const OptimizerParams& p = config.params;
  switch (config.type) {
    case OptimizerType::OneBitAdam: return std::make_unique<OneBitAdam>(p.freeze_step, comm, params);
    case OptimizerType::ZeroOneAdam:
      return std::make_unique<ZeroOneAdam>(
          ZeroOneAdamSchedule{p.var_freeze_step, p.var_update_scaler, p.local_step_scaler, p.local_step_clipper}, comm,
          params);
    case OptimizerType::OneBitLamb:
      return std::make_unique<OneBitLamb>(
          OneBitLambSettings{p.freeze_step, p.max_coeff, p.min_coeff, p.coeff_beta, p.factor_max, p.factor_min,
                             p.factor_threshold},
          comm, params);
    default: break;
  }
  DS_ASSERT(false, "make_compressed_optimizer: not a 1-bit optimizer");
  return nullptr;
}

}  // namespace ds::optim
