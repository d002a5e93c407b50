#include "zero/flat_params.h"
#include "zero/partition.h"

#include <fmt/format.h>

#include <map>

#include "util/error.h"

namespace ds::zero {
namespace {

constexpr int64_t kGradRegionAlignBytes = 64;


}  // namespace

FlatParameters FlatParameters::build(const std::vector<NamedParam>& params,
                                     const FlatLayoutOptions& options) {
  DS_ASSERT(options.alignment > 0, "alignment must be positive");
  FlatParameters out;
  // Group by (param group, dtype), keeping model order inside each group.
  std::map<std::pair<int, int>, size_t> group_of;
  for (const auto& np : params) {
    DS_ASSERT(np.param.defined() && np.param.requires_grad(), "only trainable parameters are flattened");
    auto key = std::make_pair(np.param_group, static_cast<int>(np.param.scalar_type()));
    auto it = group_of.find(key);
    if (it == group_of.end()) {
      it = group_of.emplace(key, out.groups_.size()).first;
      FlatGroup g;
      g.param_group = np.param_group;
      g.dtype = np.param.scalar_type();
      out.groups_.push_back(std::move(g));
    }
    FlatGroup& g = out.groups_[it->second];
    ParamSlot slot;
    slot.name = np.name;
    slot.shape = np.param.sizes().vec();
    slot.numel = np.param.numel();
    slot.offset = g.numel;
    slot.param = np.param;
    g.numel += slot.numel;
    DS_CHECK(out.index_.find(np.name) == out.index_.end(), Error,
             fmt::format("parameter name '{}' appears twice", np.name));
    out.index_[np.name] = {it->second, g.slots.size()};
    g.slots.push_back(std::move(slot));
  }
  // Sort groups by (param group, dtype) so the layout does not depend on first-seen order.
  // (std::map iteration order equals that sort.)
  std::vector<FlatGroup> ordered;
  std::vector<size_t> new_index(out.groups_.size());
  for (const auto& [key, idx] : group_of) {
    new_index[idx] = ordered.size();
    ordered.push_back(std::move(out.groups_[idx]));
  }
  out.groups_ = std::move(ordered);
  for (auto& [name, pos] : out.index_) pos.first = new_index[pos.first];

  // One gradient buffer for every group: byte regions, each 64-byte aligned.
  int64_t grad_bytes = 0;
  std::vector<int64_t> grad_offsets;
  torch::Device device = torch::kCPU;
  for (auto& g : out.groups_) {
    g.padded_numel = round_up(g.numel, options.alignment);
    grad_offsets.push_back(grad_bytes);
    grad_bytes += round_up(g.padded_numel * static_cast<int64_t>(c10::elementSize(g.dtype)),
                           kGradRegionAlignBytes);
    device = g.slots.front().param.device();
  }
  if (options.gradient_buffer)
    out.grad_buffer_ = torch::zeros({grad_bytes}, torch::TensorOptions().dtype(torch::kUInt8).device(device));

  torch::NoGradGuard no_grad;
  for (size_t gi = 0; gi < out.groups_.size(); ++gi) {
    FlatGroup& g = out.groups_[gi];
    const int64_t elem = static_cast<int64_t>(c10::elementSize(g.dtype));
    g.params = torch::zeros({g.padded_numel}, torch::TensorOptions().dtype(g.dtype).device(device));
    if (options.gradient_buffer)
      g.grads = out.grad_buffer_.narrow(0, grad_offsets[gi], g.padded_numel * elem).view(g.dtype);
    for (auto& s : g.slots) {
      DS_CHECK(s.param.device() == device, Error,
               fmt::format("parameter '{}' is on {} but others are on {}", s.name,
                           s.param.device().str(), device.str()));
      auto view = g.params.narrow(0, s.offset, s.numel).view(s.shape);
      view.copy_(s.param.detach());
      // The module's parameter now aliases the flat buffer; the old storage is released.
      s.param.set_data(view);
      if (g.grads.defined()) s.param.mutable_grad() = g.grads.narrow(0, s.offset, s.numel).view(s.shape);
    }
  }
  return out;
}

const ParamSlot* FlatParameters::find(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  return &groups_[it->second.first].slots[it->second.second];
}

void FlatParameters::zero_grads() {
  if (grad_buffer_.defined()) grad_buffer_.zero_();
}

int FlatParameters::rebind_grads() {
  int rebound = 0;
  if (!grad_buffer_.defined()) return 0;
  for (auto& g : groups_) {
    for (auto& s : g.slots) {
      auto view = g.grads.narrow(0, s.offset, s.numel);
      const auto& grad = s.param.grad();
      if (!grad.defined() || grad.data_ptr() != view.data_ptr()) {
        if (grad.defined()) view.view(s.shape).add_(grad.detach());  // keep what was accumulated
        s.param.mutable_grad() = view.view(s.shape);
        ++rebound;
      }
    }
  }
  return rebound;
}

int64_t FlatParameters::numel() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += g.numel;
  return n;
}

uint64_t FlatParameters::param_bytes() const {
  uint64_t b = 0;
  for (const auto& g : groups_) b += static_cast<uint64_t>(g.padded_numel) * c10::elementSize(g.dtype);
  return b;
}

}  // namespace ds::zero
