// 16-bit training state beside the flat buffers. FlatParameters holds what the module computes
// with (compute dtype) and the gradients autograd writes; this adds, per flat group, the parameter
// storage in the model dtype and the gradient accumulation buffer. When dtypes coincide the buffers
// alias instead of copying (fp32 training adds nothing).
//
// Per micro-step:  accum += round_to(model dtype)(compute grads); compute grads = 0
// (Without a flat gradient buffer — stage 2 — there is no accumulation buffer either.)
// Per step:        fp32 grads → optimizer → master → storage (rounded) → compute copy
#pragma once

#include <torch/torch.h>

#include <vector>

#include "util/memory_ledger.h"
#include "zero/dtype_plan.h"
#include "zero/flat_params.h"

namespace ds::zero {

class PrecisionBuffers {
 public:
  PrecisionBuffers(FlatParameters& flat, DtypePlan plan, MemoryLedger& ledger, Tier tier);

  const DtypePlan& plan() const { return plan_; }

  // After each backward: moves the compute-dtype gradients into the accumulation buffers, rounded
  // to the model dtype first (what a 16-bit gradient reduction would carry).
  void accumulate();
  // Group g's accumulated gradients as a contiguous fp32 tensor [padded_numel] (a view when the
  // accumulation dtype is fp32, else a converted copy). Scaling it in place scales the gradients
  // only when it is a view; callers must use the returned tensor.
  torch::Tensor fp32_grads(size_t g) const;
  void zero_grads();
  // Group g's accumulated gradients in the accumulation dtype, for in-place reduction across ranks.
  torch::Tensor& accum(size_t g) {  // the caller may write through it: no longer known to be zero
    groups_[g].accum_zero = false;
    return groups_[g].accum;
  }
  // The named parameter's piece of them (a view); ds::Error when no slot has that name.
  torch::Tensor accum_of(const std::string& name);
  // Group g's storage was overwritten (e.g. broadcast from rank 0): refresh the compute copy.
  void refresh_compute(size_t g);
  // The same for [offset, offset + numel) of it.
  void refresh_compute(size_t g, int64_t offset, int64_t numel);

  // Group g's parameters in the model dtype (what master weights are made from and written to).
  const torch::Tensor& storage(size_t g) const { return groups_[g].storage; }
  // Writes updated fp32 master weights back: storage = master (rounded), compute copy = storage.
  void write_back(size_t g, const torch::Tensor& master_fp32);

 private:
  struct Group {
    torch::Tensor storage;  // [padded] model dtype; aliases FlatGroup::params when model == compute
    torch::Tensor accum;    // [padded] grad_accum dtype; aliases FlatGroup::grads when possible
    bool storage_aliases = false;
    bool accum_aliases = false;
    bool accum_zero = true;  // accum holds zeros: the next accumulate() copies instead of adding
  };
  FlatParameters& flat_;
  DtypePlan plan_;
  std::vector<Group> groups_;
};

}  // namespace ds::zero
