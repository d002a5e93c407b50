#include "runtime/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>

#include "comm/gradients.h"
#include "util/error.h"

namespace ds {

comm::Buffer as_buffer(torch::Tensor& t) {
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

void broadcast_model(comm::Communicator& comm, torch::nn::Module& module, zero::PrecisionBuffers& precision,
                     size_t num_groups) {
  if (comm.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < num_groups; ++g) {
    auto storage = precision.storage(g);
    comm.broadcast(as_buffer(storage), 0, "broadcast_parameters");
    precision.refresh_compute(g);
  }
  for (auto& b : module.buffers(true)) {
    if (!b.is_contiguous()) continue;  // views of other buffers follow their base
    comm.broadcast(as_buffer(b), 0, "broadcast_buffers");
  }
}

void allreduce_gradients(comm::Communicator& comm, const Config& config, torch::ScalarType communication_dtype,
                         zero::PrecisionBuffers& precision, size_t num_groups) {
  if (comm.size() == 1) return;
  torch::NoGradGuard no_grad;
  const int64_t bucket = std::max<int64_t>(1, config.zero_optimization.reduce_bucket_size);
  for (size_t g = 0; g < num_groups; ++g) {
    torch::Tensor& acc = precision.accum(g);
    // DeepSpeed casts each bucket to the communication dtype, reduces, and copies back.
    torch::Tensor wire = acc.scalar_type() == communication_dtype ? acc : acc.to(communication_dtype);
    for (int64_t off = 0; off < wire.numel(); off += bucket) {
      auto chunk = wire.narrow(0, off, std::min(bucket, wire.numel() - off));
      comm::average_gradients(comm, as_buffer(chunk), config.gradient_predivide_factor, config.prescale_gradients,
                              "allreduce_gradients");
    }
    if (!wire.is_same(acc)) acc.copy_(wire);
  }
}

}  // namespace ds
