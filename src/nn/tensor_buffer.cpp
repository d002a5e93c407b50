#include "nn/tensor_buffer.h"

#include <fmt/format.h>

#include "util/error.h"

namespace ds::nn {

comm::Buffer as_buffer(const torch::Tensor& t) {
  DS_CHECK(t.is_contiguous() && t.is_cpu(), NotSupported,
           "the MPI communicator needs contiguous CPU tensors (GPU tensors go through NCCL in CUDA builds)");
  comm::ElemType type;
  switch (t.scalar_type()) {
    case torch::kFloat32: type = comm::ElemType::Fp32; break;
    case torch::kBFloat16: type = comm::ElemType::Bf16; break;
    case torch::kFloat16: type = comm::ElemType::Fp16; break;
    case torch::kFloat64: type = comm::ElemType::Fp64; break;
    case torch::kInt64: type = comm::ElemType::Int64; break;
    case torch::kInt32: type = comm::ElemType::Int32; break;
    case torch::kUInt8: type = comm::ElemType::UInt8; break;
    default: throw NotSupported(fmt::format("no communication type for {}", c10::toString(t.scalar_type())));
  }
  return comm::Buffer(t.data_ptr(), t.numel(), type);
}

}  // namespace ds::nn
