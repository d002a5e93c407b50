#include "optim/onebit_adam.h"

#include <nlohmann/json.hpp>

#include "optim/onebit_math.h"
#include "util/error.h"

namespace ds::optim {
OneBitAdam::OneBitAdam(int64_t freeze_step, comm::Communicator& comm, const std::vector<std::vector<ParamSpan>>& params)
    : freeze_step_(freeze_step), params_(params), exchange_(comm, param_numels(params)) {}

void OneBitAdam::step(std::span<const CompressedGroup> groups) {
  DS_ASSERT(groups.size() == params_.size(), "one CompressedGroup per parameter group");
  step_ += 1;
  if (step_ == 1) return;  // DeepSpeed's set-up step: buffers only, no update
  using namespace onebit_math;
  if (frozen_) {
    std::vector<float*> momenta;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const CompressedGroup& g = groups[gi];
      const Coeffs c(g);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < g.numel; ++i) g.exp_avg[i] = momentum(g.exp_avg[i], g.grad[i], c);
      for (const auto& s : params_[gi]) momenta.push_back(g.exp_avg + s.offset);
    }
    exchange_.run(momenta);
  }
  for (const CompressedGroup& g : groups) {
    const Coeffs c(g);
    const bool warm_up = !frozen_;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.numel; ++i) {
      if (warm_up) {
        g.exp_avg[i] = momentum(g.exp_avg[i], g.grad[i], c);
        g.exp_avg_sq[i] = variance(g.exp_avg_sq[i], g.grad[i], c);
      } else {
        if (g.exp_avg_mask) g.exp_avg[i] *= g.exp_avg_mask[i];
        if (g.exp_avg_sq[i] == 0.0f) g.exp_avg[i] = 0.0f;  // no variance, no step (compressed_optimizer.h)
      }
      g.param[i] = g.param[i] + c.neg_lr * adam_update(g.exp_avg[i], g.exp_avg_sq[i], g.param[i], c);
    }
  }
  if (!frozen_ && step_ >= freeze_step_) frozen_ = true;
}

nlohmann::json OneBitAdam::state_json() const { return {{"step", step_}, {"frozen", frozen_}}; }

void OneBitAdam::load_state_json(const nlohmann::json& j) {
  step_ = j.at("step").get<int64_t>();
  frozen_ = j.at("frozen").get<bool>();
}

}  // namespace ds::optim
