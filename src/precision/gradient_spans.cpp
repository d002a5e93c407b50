#include "precision/gradient_spans.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "precision/overflow.h"

namespace ds::precision {

bool any_non_finite(comm::Communicator& comm, const GradientSpans& grads, double loss) {
  int32_t bad = std::isfinite(loss) && !first_non_finite(grads.flat).has_value() ? 0 : 1;
  // Partitions, or one rank's loss: every rank must take the same decision.
  if (comm.size() > 1) comm.all_reduce(comm::Buffer(&bad, 1), comm::ReduceOp::Max, "overflow_flag");
  if (grads.tp != nullptr && grads.tp->size() > 1)
    grads.tp->all_reduce(comm::Buffer(&bad, 1), comm::ReduceOp::Max, "tp_overflow_flag");
  if (grads.pipe != nullptr && grads.pipe->size() > 1)
    grads.pipe->all_reduce(comm::Buffer(&bad, 1), comm::ReduceOp::Max, "pipe_overflow_flag");
  return bad != 0;
}

std::string first_non_finite_piece(const GradientSpans& grads) {
  for (const auto& p : grads.pieces)
    if (has_inf_or_nan(grads.piece(p))) return std::string(p.name);
  return grads.partitioned ? "(none in this rank's partition)" : "(none found)";
}

double sum_of_squares(const torch::Tensor& t) {
  if (!(t.is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous()))
    return t.to(torch::kFloat64).square().sum().item<double>();
  constexpr int64_t kBlock = int64_t(1) << 16;
  const float* x = t.data_ptr<float>();
  const int64_t n = t.numel(), blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // independent sums: the loop vectorises
      int64_t i = lo;
      for (; i + 8 <= hi; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += double(x[i + k]) * double(x[i + k]);
      for (; i < hi; ++i) acc[0] += double(x[i]) * double(x[i]);
      partial[size_t(b)] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  });
  double sum = 0.0;
  for (double p : partial) sum += p;
  return sum;
}

namespace {

bool has_group(const comm::Communicator* c) { return c != nullptr && c->size() > 1; }

// Model parallelism: [replicated, split] sums of squares, the first summed over the data-parallel
// partitions, the second over those and the tensor-parallel group; their total over the pipeline's
// stages, each tied copy counted on one stage.
double model_parallel_norm(comm::Communicator& comm, const GradientSpans& grads) {
  double sq[2] = {0.0, 0.0};
  for (const auto& p : grads.pieces)
    if (!p.pipe_copy) sq[p.tp_split ? 1 : 0] += sum_of_squares(grads.piece(p));
  if (grads.partitioned && comm.size() > 1) comm.all_reduce(comm::Buffer(sq, 2), comm::ReduceOp::Sum, "grad_norm");
  if (has_group(grads.tp)) grads.tp->all_reduce(comm::Buffer(&sq[1], 1), comm::ReduceOp::Sum, "tp_grad_norm");
  double total = sq[0] + sq[1];
  if (has_group(grads.pipe)) grads.pipe->all_reduce(comm::Buffer(&total, 1), comm::ReduceOp::Sum, "pipe_grad_norm");
  const double norm = std::sqrt(total);
  return std::isfinite(norm) ? norm : -1.0;
}

}  // namespace

double global_norm(comm::Communicator& comm, const GradientSpans& grads) {
  torch::NoGradGuard no_grad;
  if (has_group(grads.tp) || has_group(grads.pipe)) return model_parallel_norm(comm, grads);
  if (grads.partitioned) {
    double sq = 0.0;
    for (const auto& g : grads.flat) sq += sum_of_squares(g);
    if (comm.size() > 1) comm.all_reduce(comm::Buffer(&sq, 1), comm::ReduceOp::Sum, "grad_norm");
    const double norm = std::sqrt(sq);
    return std::isfinite(norm) ? norm : -1.0;
  }
  std::vector<torch::Tensor> norms;
  for (const auto& p : grads.pieces) norms.push_back(grads.piece(p).norm());
  const double norm = torch::stack(norms).norm().item<double>();
  return std::isfinite(norm) ? norm : -1.0;
}

double unscale_and_clip(comm::Communicator& comm, GradientSpans& grads, double loss_scale, double clip) {
  torch::NoGradGuard no_grad;
  if (loss_scale == 1.0) {
    if (clip <= 0.0) return -1.0;
    // fp32 path: coef = min(1, clip / (norm + 1e-6)), gradients multiplied (runtime/utils.clip_grad_norm_).
    const double norm = global_norm(comm, grads);
    const double coef = clip / (norm + 1e-6);
    if (norm >= 0 && coef < 1.0)
      for (auto& g : grads.flat) g.mul_(coef);
    return norm;
  }
  // fp16 path: the norm of the scaled gradients, one combined unscale+clip factor (reference §10).
  const double scaled_norm = clip > 0.0 ? global_norm(comm, grads) : 0.0;
  unscale_and_clip(grads.flat, loss_scale, clip, scaled_norm);
  return clip > 0.0 ? scaled_norm / loss_scale : -1.0;
}

}  // namespace ds::precision
