#include "optim/zero_one_adam.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "optim/onebit_math.h"
#include "util/error.h"

namespace ds::optim {
ZeroOneAdam::ZeroOneAdam(const ZeroOneAdamSchedule& schedule, comm::Communicator& comm,
                         const std::vector<std::vector<ParamSpan>>& params)
    : schedule_(schedule), params_(params), exchange_(comm, param_numels(params)), accumulated_(params.size()),
      anchor_(params.size()), lr_sum_(params.size(), 0.0) {}

void ZeroOneAdam::set_anchor(std::span<const CompressedGroup> groups) {
  for (size_t gi = 0; gi < groups.size(); ++gi) anchor_[gi].assign(groups[gi].param, groups[gi].param + groups[gi].numel);
}

void ZeroOneAdam::exchange_field(std::span<const CompressedGroup> groups, float* CompressedGroup::*field) {
  std::vector<float*> tensors;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (const auto& s : params_[gi]) tensors.push_back(groups[gi].*field + s.offset);
  exchange_.run(tensors);
}

void ZeroOneAdam::step(std::span<const CompressedGroup> groups) {
  DS_ASSERT(groups.size() == params_.size(), "one CompressedGroup per parameter group");
  step_ += 1;
  if (step_ == 1) return;  // DeepSpeed's set-up step
  using namespace onebit_math;
  if (frozen_ && !anchor_.empty() && anchor_[0].empty()) set_anchor(groups);  // after a checkpoint load
  const bool variance_step = !frozen_ && step_ % var_interval_ == 0;
  if (!frozen_ && !variance_step) exchange_field(groups, &CompressedGroup::grad);  // the local gradients, compressed
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const CompressedGroup& g = groups[gi];
    const Coeffs c(g);
    accumulated_[gi].resize(size_t(g.numel), 0.0f);  // the group's span, padding included
    float* acc = accumulated_[gi].data();
    const bool frozen = frozen_;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.numel; ++i) {
      if (variance_step) g.exp_avg_sq[i] = variance(g.exp_avg_sq[i], g.grad[i], c);
      g.exp_avg[i] = momentum(g.exp_avg[i], g.grad[i], c);
      if (!variance_step && g.exp_avg_mask) g.exp_avg[i] *= g.exp_avg_mask[i];
      if (!variance_step && g.exp_avg_sq[i] == 0.0f) g.exp_avg[i] = 0.0f;  // no variance, no step
      const float step = c.neg_lr * adam_update(g.exp_avg[i], g.exp_avg_sq[i], g.param[i], c);
      g.param[i] = g.param[i] + step;
      if (frozen) acc[i] = acc[i] + step;
    }
    if (frozen_) lr_sum_[gi] += g.lr;
  }
  if (frozen_ && step_ % local_interval_ == 0) sync_local_steps(groups);
  // The schedules, as DeepSpeed advances them at the end of a step.
  if (!frozen_) {
    if (variance_step && ++var_counter_ == schedule_.var_update_scaler) {
      var_counter_ = 0;
      var_interval_ *= 2;
    }
    reduce_next_ = (step_ + 1) % var_interval_ == 0;
  } else if (++local_counter_ == schedule_.local_step_scaler) {
    local_counter_ = 0;
    local_interval_ = std::min(schedule_.local_step_clipper, local_interval_ * 2);
  }
  if (!frozen_ && step_ > schedule_.var_freeze_step) {
    frozen_ = true;
    reduce_next_ = false;
    exchange_.reset_errors();  // from now on they hold errors of accumulated updates, not gradients
    set_anchor(groups);        // every rank holds the same parameters here
  }
}

void ZeroOneAdam::sync_local_steps(std::span<const CompressedGroup> groups) {
  using namespace onebit_math;
  // Turn the local updates' sum into momentum units: -sum(lr * m) per element. (DeepSpeed also
  // subtracts it from the parameters here; the anchor is where that lands, without the rounding.)
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const CompressedGroup& g = groups[gi];
    const Coeffs c(g);
    float* acc = accumulated_[gi].data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.numel; ++i) acc[i] = acc[i] * (std::sqrt(g.exp_avg_sq[i]) + c.eps);
  }
  std::vector<float*> tensors;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (const auto& s : params_[gi]) tensors.push_back(accumulated_[gi].data() + s.offset);
  exchange_.run(tensors);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const CompressedGroup& g = groups[gi];
    const Coeffs c(g);
    float* acc = accumulated_[gi].data();
    float* anchor = anchor_[gi].data();
    const float lrs = float(lr_sum_[gi]);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.numel; ++i) {
      if (g.exp_avg_mask) acc[i] *= g.exp_avg_mask[i];
      if (g.exp_avg_sq[i] == 0.0f) acc[i] = 0.0f;  // no variance, no step
      g.exp_avg[i] = 0.0f + -1.0f * (acc[i] / lrs);
      g.param[i] = anchor[i] + acc[i] / (std::sqrt(g.exp_avg_sq[i]) + c.eps);
      anchor[i] = g.param[i];
      acc[i] = 0.0f;
    }
    lr_sum_[gi] = 0.0;
  }
}

nlohmann::json ZeroOneAdam::state_json() const {
  return {{"step", step_},
          {"frozen", frozen_},
          {"reduce_next", reduce_next_},
          {"var_interval", var_interval_},
          {"var_counter", var_counter_},
          {"local_step_interval", local_interval_},
          {"local_step_counter", local_counter_}};
}

void ZeroOneAdam::load_state_json(const nlohmann::json& j) {
  step_ = j.at("step").get<int64_t>();
  frozen_ = j.at("frozen").get<bool>();
  reduce_next_ = j.at("reduce_next").get<bool>();
  var_interval_ = j.at("var_interval").get<int64_t>();
  var_counter_ = j.at("var_counter").get<int64_t>();
  local_interval_ = j.at("local_step_interval").get<int64_t>();
  local_counter_ = j.at("local_step_counter").get<int64_t>();
  for (auto& a : accumulated_) std::fill(a.begin(), a.end(), 0.0f);
  for (auto& a : anchor_) a.clear();  // set from the loaded parameters at the next step
  std::fill(lr_sum_.begin(), lr_sum_.end(), 0.0);
}

int64_t ZeroOneAdam::held_bytes() const {
  int64_t b = exchange_.held_bytes();
  for (const auto& a : accumulated_) b += int64_t(a.size() * sizeof(float));
  for (const auto& a : anchor_) b += int64_t(a.size() * sizeof(float));
  return b;
}

}  // namespace ds::optim
