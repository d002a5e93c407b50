#include "models/lora_linear.h"

#include <cmath>

#include "util/error.h"

namespace ds::models {

LoraLinearImpl::LoraLinearImpl(int64_t in, int64_t out, bool bias)
    : parallel::TpLinearImpl(in, out, bias) {}

torch::Tensor LoraLinearImpl::forward(const torch::Tensor& x) {
  auto y = parallel::TpLinearImpl::forward(x);
  if (!has_adapter()) return y;
  const auto& a = lora_A->weight;
  auto h = x.scalar_type() == a.scalar_type() ? x : x.to(a.scalar_type());
  if (!lora_dropout.is_empty()) h = lora_dropout(h);
  auto delta = torch::linear(torch::linear(h, a), lora_B->weight) * scaling_;
  return y + (delta.scalar_type() == y.scalar_type() ? delta : delta.to(y.scalar_type()));
}

void LoraLinearImpl::add_adapter(int64_t r, double alpha, double dropout) {
  DS_CHECK(!has_adapter(), Error, "this Linear already has a LoRA adapter (apply LoRA once, or merge/remove first)");
  DS_CHECK(split() == parallel::TpSplit::None, NotSupported,
           "LoRA on a tensor-parallel slice is not supported (train the adapter without tensor_parallel.autotp_size)");
  DS_CHECK(r >= 1, Error, "LoRA rank r must be >= 1, got " + std::to_string(r));
  const int64_t in = weight.size(1), out = weight.size(0);
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(weight.device());
  lora_A = register_module("lora_A", torch::nn::Linear(torch::nn::LinearOptions(in, r).bias(false)));
  lora_B = register_module("lora_B", torch::nn::Linear(torch::nn::LinearOptions(r, out).bias(false)));
  lora_A->to(opts.device(), opts.dtype().toScalarType());
  lora_B->to(opts.device(), opts.dtype().toScalarType());
  {
    torch::NoGradGuard no_grad;
    torch::nn::init::kaiming_uniform_(lora_A->weight, std::sqrt(5.0));
    lora_B->weight.zero_();
  }
  if (dropout > 0.0) lora_dropout = register_module("lora_dropout", torch::nn::Dropout(dropout));
  scaling_ = alpha / static_cast<double>(r);
}

void LoraLinearImpl::merge_adapter() {
  DS_CHECK(has_adapter(), Error, "merge: this Linear has no LoRA adapter");
  {
    torch::NoGradGuard no_grad;
    auto delta = torch::matmul(lora_B->weight.to(torch::kFloat32), lora_A->weight.to(torch::kFloat32)) * scaling_;
    weight.copy_((weight.to(torch::kFloat32) + delta.to(weight.device())).to(weight.scalar_type()));
  }
  remove_adapter();
}

void LoraLinearImpl::remove_adapter() {
  if (!has_adapter()) return;
  unregister_module("lora_A");
  unregister_module("lora_B");
  if (!lora_dropout.is_empty()) unregister_module("lora_dropout");
  lora_A = nullptr;
  lora_B = nullptr;
  lora_dropout = nullptr;
  scaling_ = 0.0;
}

}  // namespace ds::models
