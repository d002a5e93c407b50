#include "zero/precision_buffers.h"

#include <fmt/format.h>

#include "util/error.h"

namespace ds::zero {

std::string DtypePlan::table() const {
  auto row = [](const char* what, torch::ScalarType t, const std::string& note) {
    return fmt::format("  {:<22} {:<9}{}\n", what, c10::toString(t), note.empty() ? "" : "  " + note);
  };
  std::string out = "dtypes in use:\n";
  out += row("parameters (storage)", model, "");
  out += row("compute", compute, compute_reason);
  out += row("gradients", model, model == compute ? "" : "rounded from the compute dtype");
  out += row("gradient accumulation", grad_accum, "");
  out += row("communication", communication, "");
  out += row("master weights", master, model == master ? "the parameters themselves" : "");
  out += row("optimizer state", optimizer_state, "");
  return out;
}

PrecisionBuffers::PrecisionBuffers(FlatParameters& flat, DtypePlan plan, MemoryLedger& ledger, Tier tier)
    : flat_(flat), plan_(plan) {
  torch::NoGradGuard no_grad;
  for (auto& fg : flat_.groups()) {
    DS_ASSERT(fg.dtype == plan_.compute, "flat groups must hold compute-dtype parameters");
    Group g;
    g.storage_aliases = plan_.model == plan_.compute;
    g.storage = g.storage_aliases ? fg.params : fg.params.to(plan_.model);
    if (!g.storage_aliases) {
      // The module computes with exactly the values the 16-bit storage holds.
      fg.params.copy_(g.storage);
      ledger.add(tier, MemKind::Params, g.storage.numel() * g.storage.element_size());
    }
    g.accum_aliases = plan_.grad_accum == plan_.compute && plan_.model == plan_.compute;
    if (!fg.grads.defined()) {
      g.accum_aliases = true;  // no full gradients kept (stage 2/3): the gradient reducer owns them
    } else if (g.accum_aliases) {
      g.accum = fg.grads;
    } else {
      g.accum = torch::zeros({fg.padded_numel}, fg.params.options().dtype(plan_.grad_accum));
      ledger.add(tier, MemKind::Grads, g.accum.numel() * g.accum.element_size());
    }
    groups_.push_back(std::move(g));
  }
}

void PrecisionBuffers::accumulate() {
  torch::NoGradGuard no_grad;
  auto& fgs = flat_.groups();
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& g = groups_[i];
    if (g.accum_aliases) continue;
    torch::Tensor grads = fgs[i].grads;
    if (plan_.model != plan_.compute) grads = grads.to(plan_.model);  // 16-bit gradient values
    // One pass, no temporary: add_/copy_ widen the 16-bit values exactly as .to() would; after a
    // zeroing, 0 + g is g, so the first micro-batch copies.
    if (g.accum_zero) g.accum.copy_(grads);
    else g.accum.add_(grads);
    g.accum_zero = false;
    fgs[i].grads.zero_();
  }
}

torch::Tensor PrecisionBuffers::fp32_grads(size_t g) const {
  const auto& acc = groups_[g].accum;
  return acc.scalar_type() == torch::kFloat32 ? acc : acc.to(torch::kFloat32);
}

torch::Tensor PrecisionBuffers::accum_of(const std::string& name) {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const auto& slot : flat_.groups()[g].slots)
      if (slot.name == name) {
        DS_CHECK(groups_[g].accum.defined(), Error, "no accumulated gradient buffer for \"" + name + "\"");
        groups_[g].accum_zero = false;  // a view the caller may write through
        return groups_[g].accum.narrow(0, slot.offset, slot.numel);
      }
  throw Error("no trainable parameter \"" + name + "\" in the model states");
}

void PrecisionBuffers::zero_grads() {
  for (auto& g : groups_) {
    // An aliasing accumulator is the flat gradients themselves, which flat_.zero_grads() clears.
    if (g.accum.defined() && !g.accum_aliases && !g.accum_zero) g.accum.zero_();
    g.accum_zero = true;
  }
  flat_.zero_grads();
}

void PrecisionBuffers::refresh_compute(size_t gi) { refresh_compute(gi, 0, groups_[gi].storage.numel()); }

void PrecisionBuffers::refresh_compute(size_t gi, int64_t offset, int64_t numel) {
  torch::NoGradGuard no_grad;
  if (!groups_[gi].storage_aliases)
    flat_.groups()[gi].params.narrow(0, offset, numel).copy_(groups_[gi].storage.narrow(0, offset, numel));
}

void PrecisionBuffers::write_back(size_t gi, const torch::Tensor& master) {
  torch::NoGradGuard no_grad;
  Group& g = groups_[gi];
  if (g.storage.data_ptr() != master.data_ptr()) g.storage.copy_(master);  // rounds to the model dtype
  if (!g.storage_aliases) flat_.groups()[gi].params.copy_(g.storage);
}

}  // namespace ds::zero
