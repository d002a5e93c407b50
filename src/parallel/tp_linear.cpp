#include "parallel/tp_linear.h"

#include <fmt/format.h>

#include "parallel/tp_collectives.h"
#include "util/error.h"

namespace ds::parallel {

torch::Tensor column_slice(const torch::Tensor& t, int64_t parts, int world, int rank, const std::string& name,
                           const char* what) {
  const int64_t n = t.size(0);
  if (parts < 1 || n % (parts * world) != 0)
    throw ConfigError("tensor_parallel.autotp_size",
                      fmt::format("layer '{}': {} {} does not split into {} block(s) over {} tensor-parallel "
                                  "ranks; choose an autotp_size that divides it (for attention: one that divides "
                                  "the number of heads)",
                                  name, what, n, parts, world));
  const int64_t block = n / parts, mine = block / world;
  std::vector<torch::Tensor> pieces;
  for (int64_t p = 0; p < parts; ++p) pieces.push_back(t.narrow(0, p * block + rank * mine, mine));
  return torch::cat(pieces, 0).contiguous();
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const torch::nn::Linear& full, comm::Communicator& tp,
                                                   ColumnParallelOptions options)
    : tp_(&tp), options_(std::move(options)) {
  DS_CHECK(!options_.gather_output || options_.parts == 1, NotSupported,
           fmt::format("layer '{}': gather_output on a fused layer ({} parts) would interleave the parts",
                       options_.name, options_.parts));
  torch::NoGradGuard no_grad;
  const auto& o = options_;
  weight = register_parameter("weight", column_slice(full->weight, o.parts, tp.size(), tp.rank(), o.name,
                                                     "out_features").clone());
  if (full->bias.defined())
    bias = register_parameter("bias", column_slice(full->bias, o.parts, tp.size(), tp.rank(), o.name,
                                                   "out_features").clone());
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = torch::nn::functional::linear(copy_to_tp_region(x, *tp_), weight, bias);
  return options_.gather_output ? gather_from_tp_region(y, *tp_) : y;
}

RowParallelLinearImpl::RowParallelLinearImpl(const torch::nn::Linear& full, comm::Communicator& tp,
                                             RowParallelOptions options)
    : tp_(&tp), options_(std::move(options)) {
  torch::NoGradGuard no_grad;
  const torch::Tensor columns = column_slice(full->weight.t(), 1, tp.size(), tp.rank(), options_.name, "in_features");
  weight = register_parameter("weight", columns.t().contiguous().clone());
  if (full->bias.defined()) bias = register_parameter("bias", full->bias.detach().clone());
}

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& x) {
  const torch::Tensor local = options_.input_is_parallel ? x : scatter_to_tp_region(x, *tp_);
  torch::Tensor y = reduce_from_tp_region(torch::nn::functional::linear(local, weight), *tp_);
  return bias.defined() ? y + bias : y;
}

}  // namespace ds::parallel
