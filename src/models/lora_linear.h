// ds::models::LoraLinear: a torch Linear that can carry one LoRA adapter (PEFT's lora.Linear).
// Without an adapter it is exactly torch::nn::Linear (same parameters, same forward). With one,
// forward(x) = x·Wᵀ + b + (alpha/r) · B(A(dropout(x))), A [r,in] Kaiming-uniform(a=√5), B [out,r]
// zeros (PEFT's init_lora_weights=true), so the adapted layer starts equal to the base. The adapter
// lives in the same module, so the base keeps its Hugging Face name ("…q_proj.weight") and the
// adapter is "…q_proj.lora_A.weight" / "…q_proj.lora_B.weight", PEFT's names less "base_model.model.".
// Every projection of the built-in families is one (the LM head and OPT's project_in/out are not).
#pragma once

#include <torch/torch.h>

#include "parallel/tp_linear.h"

namespace ds::models {

// A TpLinear: AutoTP can cut the base layer into a tensor-parallel slice (without an adapter).
class LoraLinearImpl : public parallel::TpLinearImpl {
 public:
  using parallel::TpLinearImpl::TpLinearImpl;
  LoraLinearImpl(int64_t in, int64_t out, bool bias);

  // The adapter computes in its own dtype (fp32 on a 16-bit base: x is cast in, the update cast
  // back to the base output's dtype, as PEFT's autocast_adapter_dtype).
  torch::Tensor forward(const torch::Tensor& x);

  // Registers lora_A, lora_B (fp32, on the weight's device) and, for dropout > 0, lora_dropout.
  // Throws ds::Error when one is already attached or r < 1.
  void add_adapter(int64_t r, double alpha, double dropout);
  bool has_adapter() const { return !lora_A.is_empty(); }
  // W += (alpha/r) · B·A in W's dtype, then the adapter is removed: a plain Linear again.
  void merge_adapter();
  // Drops the adapter without merging.
  void remove_adapter();
  double scaling() const { return scaling_; }

  torch::nn::Linear lora_A{nullptr}, lora_B{nullptr};
  torch::nn::Dropout lora_dropout{nullptr};

 private:
  double scaling_ = 0.0;
};
TORCH_MODULE(LoraLinear);

}  // namespace ds::models
