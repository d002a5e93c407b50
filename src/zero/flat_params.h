// Trainable parameters relocated into flat contiguous buffers, one per (param group, dtype), keyed by
// dotted name; their gradients in ONE contiguous byte buffer. Modules keep working because every
// parameter becomes a view of its slot (set_data), and every .grad a view of the gradient buffer,
// into which autograd accumulates in place. The flat buffer is the unit ZeRO partitions later.
#pragma once

#include <torch/torch.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ds::zero {

struct ParamSlot {
  std::string name;             // dotted name, e.g. "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;
  int64_t offset = 0;           // elements into the group's flat buffer
  int64_t numel = 0;
  torch::Tensor param;          // the module's parameter, now a view of the flat buffer
  // Where this slot's elements start inside the parameter (flattened): 0 for whole parameters, the
  // piece's start for ZeRO partitions and shards. Checkpoints key state by (name, param_offset).
  int64_t param_offset = 0;
};

struct FlatGroup {
  int param_group = 0;          // index of the user's param group
  torch::ScalarType dtype = torch::kFloat32;
  std::vector<ParamSlot> slots; // in model order; offsets contiguous, no interior padding
  int64_t numel = 0;            // sum of slot numels
  int64_t padded_numel = 0;     // numel rounded up to FlatLayoutOptions::alignment (zero padding)
  torch::Tensor params;         // [padded_numel] storage the parameters view
  torch::Tensor grads;          // [padded_numel] view into the gradient buffer (undefined without one)
};

struct NamedParam {
  std::string name;
  torch::Tensor param;
  int param_group = 0;
};

struct FlatLayoutOptions {
  int64_t alignment = 16;       // elements; each group's flat length is padded to a multiple
  // false (ZeRO stage 2): no gradient buffer; autograd allocates each .grad and the gradient
  // reducer takes it as soon as it is complete, so full gradients never persist.
  bool gradient_buffer = true;
};

class FlatParameters {
 public:
  FlatParameters() = default;
  // Relocates `params` (trainable, distinct tensors, one dtype per param) into flat buffers.
  static FlatParameters build(const std::vector<NamedParam>& params, const FlatLayoutOptions& options);

  std::vector<FlatGroup>& groups() { return groups_; }
  const std::vector<FlatGroup>& groups() const { return groups_; }
  const ParamSlot* find(const std::string& name) const;

  // The single contiguous gradient buffer (uint8; groups are typed views, 64-byte aligned).
  const torch::Tensor& grad_buffer() const { return grad_buffer_; }
  void zero_grads();
  // Re-points every parameter's .grad at its gradient-buffer view if user code replaced or reset
  // it (e.g. Module::zero_grad with set_to_none); returns how many were re-pointed.
  int rebind_grads();

  int64_t numel() const;                   // trainable elements, without padding
  uint64_t param_bytes() const;            // flat parameter storage, with padding
  uint64_t grad_bytes() const { return grad_buffer_.defined() ? static_cast<uint64_t>(grad_buffer_.numel()) : 0; }

 private:
  std::vector<FlatGroup> groups_;
  torch::Tensor grad_buffer_;
  std::unordered_map<std::string, std::pair<size_t, size_t>> index_;  // name → (group, slot)
};

}  // namespace ds::zero
