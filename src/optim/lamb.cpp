#include "optim/lamb.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "util/error.h"

namespace ds::optim {

LambHyperparams LambHyperparams::from_config(const OptimizerParams& p) {
  if (p.amsgrad) {
    throw ConfigError("optimizer.params.amsgrad", "FusedLamb does not support the AMSGrad variant (set it to false)");
  }
  LambHyperparams h;
  h.lr = p.lr;
  h.beta1 = p.betas[0];
  h.beta2 = p.betas[1];
  h.eps = p.eps;
  h.weight_decay = p.weight_decay;
  h.bias_correction = p.bias_correction;
  h.max_coeff = p.max_coeff;
  h.min_coeff = p.min_coeff;
  h.eps_inside_sqrt = p.eps_inside_sqrt;
  return h;
}

namespace {

// Norm partial sums are taken over blocks of this many elements, then added in block order.
constexpr std::int64_t kBlock = 16384;

struct Block {
  std::int64_t begin, end;
  size_t segment;
};

struct Constants {
  float b1, b2, one_minus_b1, one_minus_b2, eps, decay;
  bool eps_inside_sqrt;
};

// The update direction u for one element, from the already-updated m and v (both kernel passes
// compute it the same way, as FusedLamb's part 1 and part 3 do).
inline float lamb_direction(float mi, float vi, float param, const Constants& c) {
  const float denom = c.eps_inside_sqrt ? std::sqrt(vi + c.eps) : std::sqrt(vi) + c.eps;
  return std::fma(c.decay, param, mi / denom);
}

}  // namespace

std::vector<float> lamb_update(float* p, const float* g, float* m, float* v, std::int64_t n,
                               std::span<const LambSegment> segments, const LambHyperparams& h,
                               const LambState& s) {
  DS_ASSERT(s.step >= 1, "lamb_update: increment LambState::step before the step's updates");
  Constants c;
  c.b1 = static_cast<float>(h.beta1);
  c.b2 = static_cast<float>(h.beta2);
  c.one_minus_b1 = 1.0f - c.b1;
  c.one_minus_b2 = 1.0f - c.b2;
  c.eps = static_cast<float>(h.eps);
  c.decay = static_cast<float>(h.weight_decay);
  c.eps_inside_sqrt = h.eps_inside_sqrt;
  const float lr = static_cast<float>(h.lr);
  const float max_coeff = static_cast<float>(h.max_coeff);
  const float min_coeff = static_cast<float>(h.min_coeff);
  // FusedLamb: float bias corrections from a double pow of the fp32 betas.
  float step_size = lr;
  if (h.bias_correction) {
    const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.b1), static_cast<double>(s.step)));
    const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.b2), static_cast<double>(s.step)));
    step_size = lr * std::sqrt(bc2) / bc1;
  }

  std::vector<Block> blocks;
  std::int64_t prev_end = 0;
  for (size_t k = 0; k < segments.size(); ++k) {
    const LambSegment& seg = segments[k];
    DS_ASSERT(seg.offset >= prev_end && seg.numel >= 0 && seg.offset + seg.numel <= n,
              "lamb_update: segments must be in order, disjoint and inside the span");
    prev_end = seg.offset + seg.numel;
    for (std::int64_t b = seg.offset; b < prev_end; b += kBlock) {
      blocks.push_back({b, std::min(b + kBlock, prev_end), k});
    }
  }
  const auto num_blocks = static_cast<std::int64_t>(blocks.size());

  // Pass 1: moments, and per block the sums of p^2 (before the update) and u^2.
  std::vector<double> w_sq(blocks.size(), 0.0), u_sq(blocks.size(), 0.0);
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    double w_acc = 0.0, u_acc = 0.0;
    for (std::int64_t i = blocks[b].begin; i < blocks[b].end; ++i) {
      const float grad = g[i];
      const float param = p[i];
      const float mi = std::fma(grad, c.one_minus_b1, m[i] * c.b1);
      const float vi = std::fma(c.one_minus_b2 * grad, grad, v[i] * c.b2);
      m[i] = mi;
      v[i] = vi;
      const float u = lamb_direction(mi, vi, param, c);
      w_acc += static_cast<double>(param) * param;
      u_acc += static_cast<double>(u) * u;
    }
    w_sq[b] = w_acc;
    u_sq[b] = u_acc;
  }

  // Per tensor: trust ratio from the fp32 norms, clamped in FusedLamb's order (max, then min).
  std::vector<double> seg_w(segments.size(), 0.0), seg_u(segments.size(), 0.0);
  for (size_t b = 0; b < blocks.size(); ++b) {
    seg_w[blocks[b].segment] += w_sq[b];
    seg_u[blocks[b].segment] += u_sq[b];
  }
  std::vector<float> coeffs(segments.size(), 1.0f);
  std::vector<float> scaled_step(segments.size(), 0.0f);
  for (size_t k = 0; k < segments.size(); ++k) {
    const float w_norm = std::sqrt(static_cast<float>(seg_w[k]));
    const float u_norm = std::sqrt(static_cast<float>(seg_u[k]));
    float coeff = 1.0f;
    if (w_norm != 0.0f && u_norm != 0.0f) {
      coeff = w_norm / u_norm;
      if (coeff > max_coeff) coeff = max_coeff;
      if (coeff < min_coeff) coeff = min_coeff;
    }
    coeffs[k] = coeff;
    scaled_step[k] = -(step_size * coeff);
  }

  // Pass 2: p -= step_size * coeff * u, with u recomputed from the stored moments.
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const float neg_step = scaled_step[blocks[b].segment];
    for (std::int64_t i = blocks[b].begin; i < blocks[b].end; ++i) {
      const float param = p[i];
      p[i] = std::fma(neg_step, lamb_direction(m[i], v[i], param, c), param);
    }
  }
  return coeffs;
}

}  // namespace ds::optim
