// The step-wide gradient checks, over the flat fp32 gradients the optimizer is about to read: the
// inf/NaN check (every rank takes the same decision), the global norm with DeepSpeed's arithmetic
// per stage, and unscale + clip. The engine calls these in order at each accumulation boundary.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace ds::precision {

// One parameter's piece of a flat gradient span.
struct GradientPiece {
  std::string_view name;
  size_t group = 0;
  int64_t offset = 0;
  int64_t numel = 0;
  bool tp_split = false;  // a tensor-parallel slice: differs across the tensor-parallel group
  bool pipe_copy = false; // a tied parameter's copy whose norm another pipeline stage counts
};

// This rank's flat gradients (one per param group) and the pieces in them.
struct GradientSpans {
  std::vector<torch::Tensor> flat;
  std::vector<GradientPiece> pieces;
  // True when the spans are partitions (ZeRO): norms and flags are combined across ranks.
  bool partitioned = false;
  // The tensor-parallel group (AutoTP), or null: the norm sums the tp_split pieces over it and
  // counts the replicated ones once; the inf/NaN decision is agreed over it too.
  comm::Communicator* tp = nullptr;
  // The pipeline's stages (PipelineEngine), or null: each stage holds different parameters, so the
  // norm's squares are summed over it (tied copies counted on their first stage only) and the inf/NaN
  // decision is agreed over it.
  comm::Communicator* pipe = nullptr;

  torch::Tensor piece(const GradientPiece& p) const { return flat[p.group].narrow(0, p.offset, p.numel); }
};

// Collective when comm.size() > 1 (and over grads.tp and grads.pipe): true on every rank when any rank's gradients
// or loss hold inf/NaN.
bool any_non_finite(comm::Communicator& comm, const GradientSpans& grads, double loss);

// The first piece (in model order) whose gradient holds inf/NaN on this rank, for error messages.
std::string first_non_finite_piece(const GradientSpans& grads);

// The L2 norm of every gradient, -1 when inf/NaN. Partitioned: each rank's sum of squares summed
// across ranks (collective). Replicated: DeepSpeed's stage-0 arithmetic, the norm of the stacked
// per-tensor norms (reference §19). With grads.tp, DeepSpeed's model-parallel arithmetic: the split
// pieces' squares summed over the tensor-parallel group plus the replicated ones' once; with
// grads.pipe, that sum over the stages too.
double global_norm(comm::Communicator& comm, const GradientSpans& grads);

// Σ x² accumulated in double, what DeepSpeed's g.double().norm() squares, without the double copy:
// a contiguous fp32 CPU tensor is read once in fixed blocks (the same sum whatever the thread
// count); anything else goes through torch in double.
double sum_of_squares(const torch::Tensor& t);

// Unscales by loss_scale and clips to `clip` (<= 0: no clipping) in place, as DeepSpeed does for
// each path (reference §10). Returns the unscaled global norm, or -1 when it was not computed.
double unscale_and_clip(comm::Communicator& comm, GradientSpans& grads, double loss_scale, double clip);

}  // namespace ds::precision
