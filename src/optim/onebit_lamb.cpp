#include "optim/onebit_lamb.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "optim/onebit_math.h"
#include "util/error.h"

namespace ds::optim {
namespace {

int64_t total(const std::vector<std::vector<ParamSpan>>& params, bool apart) {
  int64_t n = 0;
  for (const auto& g : params)
    for (const auto& s : g)
      if (s.apart == apart) n += s.numel;
  return n;
}

// The exchange's tensors: the joined momenta (when any), then each parameter kept apart.
std::vector<int64_t> exchanged_numels(const std::vector<std::vector<ParamSpan>>& params) {
  std::vector<int64_t> n;
  if (const int64_t joined = total(params, false); joined > 0) n.push_back(joined);
  for (const auto& g : params)
    for (const auto& s : g)
      if (s.apart) n.push_back(s.numel);
  return n;
}

// The joined momenta are one span already: one group, nothing kept apart.
bool single_span(const std::vector<std::vector<ParamSpan>>& params) {
  return params.size() == 1 && total(params, true) == 0;
}

// Copies the joined parameters' elements between the groups' spans and `flat` (to_flat or back).
void copy_joined(const std::vector<std::vector<ParamSpan>>& params, std::span<const CompressedGroup> groups,
                 std::vector<float>& flat, bool to_flat) {
  int64_t at = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (const auto& s : params[gi]) {
      if (s.apart) continue;
      float* m = groups[gi].exp_avg + s.offset;
      if (to_flat)
        std::memcpy(flat.data() + at, m, size_t(s.numel) * sizeof(float));
      else
        std::memcpy(m, flat.data() + at, size_t(s.numel) * sizeof(float));
      at += s.numel;
    }
}

}  // namespace

OneBitLamb::OneBitLamb(const OneBitLambSettings& settings, comm::Communicator& comm,
                       const std::vector<std::vector<ParamSpan>>& params)
    : settings_(settings),
      params_(params),
      total_numel_(total(params, false) + total(params, true)),
      joined_numel_(total(params, false)),
      exchange_(comm, exchanged_numels(params)) {
  for (const auto& g : params) {
    scalars_.emplace_back(g.size());
    int64_t next = 0;
    for (const auto& s : g) {
      DS_ASSERT(s.offset == next, "a group's parameters are contiguous from offset 0");
      next += s.numel;
    }
  }
  if (!single_span(params) && comm.size() > 1) flat_.resize(size_t(joined_numel_));
}

void OneBitLamb::step(std::span<const CompressedGroup> groups) {
  DS_ASSERT(groups.size() == params_.size(), "one CompressedGroup per parameter group");
  step_ += 1;
  last_coeffs_.clear();
  if (step_ == 1) return;  // DeepSpeed's set-up step
  if (frozen_) {
    compressed_step(groups);
    return;
  }
  warm_up_step(groups);
  if (step_ >= settings_.freeze_step) frozen_ = true;
}

void OneBitLamb::warm_up_step(std::span<const CompressedGroup> groups) {
  using namespace onebit_math;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const CompressedGroup& g = groups[gi];
    const Coeffs c(g);
    const bool snapshot = step_ == settings_.freeze_step;  // the fresh variance starts from here
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.numel; ++i) {
      g.exp_avg[i] = momentum(g.exp_avg[i], g.grad[i], c);
      g.exp_avg_sq[i] = variance(g.exp_avg_sq[i], g.grad[i], c);
      if (snapshot) g.exp_avg_sq_fresh[i] = g.exp_avg_sq[i];
    }
    for (size_t k = 0; k < params_[gi].size(); ++k) {
      const ParamSpan& s = params_[gi][k];
      float* p = g.param + s.offset;
      const float* m = g.exp_avg + s.offset;
      const float* v = g.exp_avg_sq + s.offset;
      const float weight_norm = float(norm(p, s.numel));
      double sq = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sq)
      for (int64_t i = 0; i < s.numel; ++i) {
        const float u = adam_update(m[i], v[i], p[i], c);
        sq += double(u) * double(u);
      }
      const float update_norm = float(std::sqrt(sq));
      double coeff = 1.0;
      if (weight_norm != 0.0f && update_norm != 0.0f)
        coeff = std::clamp(double(weight_norm / update_norm), settings_.min_coeff, settings_.max_coeff);
      Scalars& sc = scalars_[gi][k];
      if (coeff != 1.0) sc.lamb_coeff_freeze = settings_.coeff_beta * sc.lamb_coeff_freeze + (1 - settings_.coeff_beta) * coeff;
      last_coeffs_.push_back(coeff);
      const float scaled_lr = float(-g.lr * coeff);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < s.numel; ++i) p[i] = p[i] + scaled_lr * adam_update(m[i], v[i], p[i], c);
    }
  }
}

void OneBitLamb::compressed_step(std::span<const CompressedGroup> groups) {
  using namespace onebit_math;
  // The momentum before this step, for the gradient reconstruction below.
  last_momentum_.resize(size_t(total_numel_));
  {
    int64_t at = 0;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const int64_t n = params_[gi].empty() ? 0 : params_[gi].back().offset + params_[gi].back().numel;
      std::memcpy(last_momentum_.data() + at, groups[gi].exp_avg, size_t(n) * sizeof(float));
      at += n;
    }
  }
  if (!scaled_) {  // once, at the first compressed step: bring the joined momenta to a common RMS
    std::vector<double> rms;
    double united = 0.0;
    size_t joined = 0;
    for (size_t gi = 0; gi < groups.size(); ++gi)
      for (const auto& s : params_[gi]) {
        rms.push_back(s.numel ? double(float(norm(groups[gi].exp_avg + s.offset, s.numel)) / float(std::sqrt(double(s.numel)))) : 0.0);
        if (!s.apart) {
          united += rms.back();
          ++joined;
        }
      }
    united /= double(std::max<size_t>(joined, 1));
    size_t k = 0;
    for (size_t gi = 0; gi < groups.size(); ++gi)
      for (size_t j = 0; j < params_[gi].size(); ++j, ++k)
        // DeepSpeed divides by zero for an all-zero momentum; such a parameter keeps scale 1, as
        // does one exchanged apart (compressed with its own scale).
        scalars_[gi][j].scaling_coeff = rms[k] > 0.0 && !params_[gi][j].apart ? united / rms[k] : 1.0;
    scaled_ = true;
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const CompressedGroup& g = groups[gi];
    const Coeffs c(g);
    for (size_t k = 0; k < params_[gi].size(); ++k) {
      const ParamSpan& s = params_[gi][k];
      const float scale = float(scalars_[gi][k].scaling_coeff);
      float* m = g.exp_avg + s.offset;
      const float* gr = g.grad + s.offset;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < s.numel; ++i) m[i] = momentum(m[i], gr[i], c) * scale;
    }
  }
  std::vector<float*> tensors;  // exchanged_numels' order
  if (joined_numel_ > 0) {
    if (!flat_.empty()) copy_joined(params_, groups, flat_, true);
    tensors.push_back(flat_.empty() ? groups[0].exp_avg : flat_.data());
  }
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (const auto& s : params_[gi])
      if (s.apart) tensors.push_back(groups[gi].exp_avg + s.offset);
  exchange_.run(tensors);
  if (!flat_.empty()) copy_joined(params_, groups, flat_, false);
  int64_t at = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const CompressedGroup& g = groups[gi];
    const Coeffs c(g);
    for (size_t k = 0; k < params_[gi].size(); ++k) {
      const ParamSpan& s = params_[gi][k];
      Scalars& sc = scalars_[gi][k];
      const float scale = float(sc.scaling_coeff);
      float* p = g.param + s.offset;
      float* m = g.exp_avg + s.offset;
      const float* v = g.exp_avg_sq + s.offset;
      const float* mask = g.exp_avg_mask ? g.exp_avg_mask + s.offset : nullptr;
      float* fresh = g.exp_avg_sq_fresh + s.offset;
      const float* last = last_momentum_.data() + at;
      double update_sq = 0.0, prelim_sq = 0.0;
      float factor_f = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(static) reduction(+ : update_sq, prelim_sq) reduction(max : factor_f)
      for (int64_t i = 0; i < s.numel; ++i) {
        m[i] = v[i] == 0.0f ? 0.0f : m[i] / scale;  // no variance, no step
        if (mask) m[i] *= mask[i];
        const float reconstructed = (m[i] - last[i] * c.beta1) / c.one_minus_beta1;
        fresh[i] = variance(fresh[i], reconstructed, c);
        const float denom = std::sqrt(v[i]) + c.eps;
        const float prelim = m[i] / denom;
        const float u = c.weight_decay > 0.0f ? prelim + c.weight_decay * p[i] : prelim;
        update_sq += double(u) * double(u);
        prelim_sq += double(prelim) * double(prelim);
        factor_f = std::max(factor_f, denom / (std::sqrt(fresh[i]) + c.eps));
      }
      const float update_norm = float(std::sqrt(update_sq));
      double factor = double(factor_f);
      if (g.weight_decay > 0.0) {
        const double ratio = std::min(1.0, double(float(std::sqrt(prelim_sq)) / update_norm));
        factor = factor * ratio + (1.0 - ratio);
      }
      factor = std::clamp(factor, settings_.factor_min, settings_.factor_max);
      factor = std::clamp(factor, sc.last_factor * (1.0 - settings_.factor_threshold),
                          sc.last_factor * (1.0 + settings_.factor_threshold));
      sc.last_factor = factor;
      const double coeff = sc.lamb_coeff_freeze * factor;
      last_coeffs_.push_back(coeff);
      const float scaled_lr = float(-g.lr * coeff);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < s.numel; ++i) p[i] = p[i] + scaled_lr * adam_update(m[i], v[i], p[i], c);
      at += s.numel;
    }
  }
}

nlohmann::json OneBitLamb::state_json() const {
  nlohmann::json coeff_freeze = nlohmann::json::array(), last_factor = nlohmann::json::array(),
                 scaling = nlohmann::json::array();
  for (const auto& group : scalars_)
    for (const auto& sc : group) {
      coeff_freeze.push_back(sc.lamb_coeff_freeze);
      last_factor.push_back(sc.last_factor);
      scaling.push_back(sc.scaling_coeff);
    }
  return {{"step", step_},         {"frozen", frozen_},           {"scaled", scaled_},
          {"lamb_coeff_freeze", coeff_freeze}, {"last_factor", last_factor}, {"scaling_coeff", scaling}};
}

void OneBitLamb::load_state_json(const nlohmann::json& j) {
  size_t count = 0;
  for (const auto& group : scalars_) count += group.size();
  const auto& cf = j.at("lamb_coeff_freeze");
  const auto& lf = j.at("last_factor");
  const auto& sc = j.at("scaling_coeff");
  DS_CHECK(cf.size() == count && lf.size() == count && sc.size() == count, Error,
           "checkpoint: OneBitLamb state for " + std::to_string(cf.size()) + " parameters, the model has " +
               std::to_string(count));
  step_ = j.at("step").get<int64_t>();
  frozen_ = j.at("frozen").get<bool>();
  scaled_ = j.at("scaled").get<bool>();
  size_t k = 0;
  for (auto& group : scalars_)
    for (auto& s : group) {
      s.lamb_coeff_freeze = cf[k].get<double>();
      s.last_factor = lf[k].get<double>();
      s.scaling_coeff = sc[k].get<double>();
      ++k;
    }
}

int64_t OneBitLamb::held_bytes() const {
  return exchange_.held_bytes() + int64_t((flat_.size() + last_momentum_.capacity()) * sizeof(float));
}

}  // namespace ds::optim
