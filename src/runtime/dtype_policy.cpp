#include "runtime/dtype_policy.h"

#include "util/error.h"
#include "util/system_info.h"

namespace ds {

torch::ScalarType to_scalar_type(DType t) {
  switch (t) {
    case DType::Fp16: return torch::kFloat16;
    case DType::Bf16: return torch::kBFloat16;
    case DType::Fp32: return torch::kFloat32;
  }
  return torch::kFloat32;
}

// 16-bit storage and communication; compute in the model dtype on GPU, and on CPU in fp32 where
// LibTorch has no fast 16-bit GEMM.
zero::DtypePlan resolve_dtype_plan(const Config& c, torch::Device device) {
  zero::DtypePlan p;
  p.model = c.fp16.enabled ? torch::kFloat16 : c.bf16.enabled ? torch::kBFloat16 : torch::kFloat32;
  if (c.data_types.compute_dtype) {
    p.compute = to_scalar_type(*c.data_types.compute_dtype);
    p.compute_reason = "data_types.compute_dtype";
  } else if (p.model == torch::kFloat32 || !device.is_cpu()) {
    p.compute = p.model;
  } else if (p.model == torch::kFloat16) {
    p.compute = torch::kFloat32;
    p.compute_reason = "CPU: LibTorch 1.13 has no fp16 GEMM";
  } else if (detect_cpu_isa().avx512bf16) {
    p.compute = torch::kBFloat16;
    p.compute_reason = "CPU has AVX512-BF16";
  } else {
    p.compute = torch::kFloat32;
    p.compute_reason = "CPU without AVX512-BF16: bf16 GEMM ~20x slower than fp32";
  }
  DS_CHECK(!(p.compute == torch::kFloat16 && device.is_cpu()), NotSupported,
           "data_types.compute_dtype: fp16 compute needs a GPU (LibTorch 1.13 has no fp16 GEMM on CPU)");
  // Accumulation: the configured dtype; by default fp32 for bf16 (DeepSpeed's bf16 pitfall, §8.3,
  // avoided), the model dtype otherwise.
  if (c.data_types.grad_accum_dtype) p.grad_accum = to_scalar_type(*c.data_types.grad_accum_dtype);
  else p.grad_accum = p.model == torch::kBFloat16 ? torch::kFloat32 : p.model;
  p.communication = to_scalar_type(c.effective_communication_data_type());
  return p;
}

}  // namespace ds
