#include "parallel/tp_linear.h"

#include <fmt/format.h>

#include "nn/memory_efficient_linear.h"
#include "parallel/tp_collectives.h"
#include "parallel/tp_overlap.h"
#include "util/error.h"

namespace ds::parallel {

torch::Tensor column_slice(const torch::Tensor& t, int64_t parts, int world, int rank, const std::string& name,
                           const char* what, int64_t unit) {
  const int64_t n = t.size(0);
  if (parts < 1 || unit < 1 || n % (parts * world * unit) != 0)
    throw ConfigError("tensor_parallel.autotp_size",
                      fmt::format("layer '{}': {} {} does not split into {} block(s){} over {} tensor-parallel "
                                  "ranks; choose an autotp_size that divides it (for attention: one that divides "
                                  "the number of heads{})",
                                  name, what, n, parts, unit > 1 ? fmt::format(" of whole {}-wide heads", unit) : "",
                                  world, unit > 1 ? fmt::format(", {} here", n / parts / unit) : ""));
  const int64_t block = n / parts, mine = block / world;
  std::vector<torch::Tensor> pieces;
  for (int64_t p = 0; p < parts; ++p) pieces.push_back(t.narrow(0, p * block + rank * mine, mine));
  return torch::cat(pieces, 0).contiguous();
}

TpLinearImpl::TpLinearImpl(int64_t in, int64_t out, bool bias)
    : torch::nn::LinearImpl(torch::nn::LinearOptions(in, out).bias(bias)) {}

void TpLinearImpl::shard_columns(comm::Communicator& tp, ColumnParallelOptions o) {
  DS_CHECK(split_ == TpSplit::None, Error, fmt::format("layer '{}' is already tensor-parallel", o.name));
  DS_CHECK(!o.gather_output || o.parts == 1, NotSupported,
           fmt::format("layer '{}': gather_output on a fused layer ({} parts) would interleave the parts", o.name,
                       o.parts));
  torch::NoGradGuard no_grad;
  // Both slices are checked before either parameter changes: a refused layer stays whole.
  torch::Tensor w = column_slice(weight, o.parts, tp.size(), tp.rank(), o.name, "out_features", shard_unit_);
  torch::Tensor b = bias.defined() ? column_slice(bias, o.parts, tp.size(), tp.rank(), o.name, "out_features", shard_unit_)
                                   : torch::Tensor();
  weight.set_data(w.clone());
  if (b.defined()) bias.set_data(b.clone());
  tp_ = &tp;
  split_ = TpSplit::Column;
  parts_ = o.parts;
  gather_output_ = o.gather_output;
}

void TpLinearImpl::shard_rows(comm::Communicator& tp, RowParallelOptions o) {
  DS_CHECK(split_ == TpSplit::None, Error, fmt::format("layer '{}' is already tensor-parallel", o.name));
  torch::NoGradGuard no_grad;
  const torch::Tensor columns = column_slice(weight.t(), 1, tp.size(), tp.rank(), o.name, "in_features", shard_unit_);
  weight.set_data(columns.t().contiguous());
  tp_ = &tp;
  split_ = TpSplit::Row;
  input_is_parallel_ = o.input_is_parallel;
}

torch::Tensor TpLinearImpl::linear(const torch::Tensor& x, const torch::Tensor& b) const {
  return memory_efficient_ ? nn::memory_efficient_linear(x, weight, b) : torch::nn::functional::linear(x, weight, b);
}

torch::Tensor TpLinearImpl::forward(const torch::Tensor& x) {
  switch (split_) {
    case TpSplit::None:
      return linear(x, bias);
    case TpSplit::Column: {
      torch::Tensor y = overlap_comm_ ? column_parallel_linear_overlapped(x, weight, bias, *tp_)
                                      : linear(copy_to_tp_region(x, *tp_), bias);
      return gather_output_ ? gather_from_tp_region(y, *tp_) : y;
    }
    case TpSplit::Row: {
      const torch::Tensor local = input_is_parallel_ ? x : scatter_to_tp_region(x, *tp_);
      torch::Tensor y = reduce_from_tp_region(linear(local, {}), *tp_);
      return bias.defined() ? y + bias : y;
    }
  }
  return {};
}

namespace {

TpLinear copy_of(const torch::nn::Linear& full) {
  const auto& o = full->options;
  TpLinear layer(o.in_features(), o.out_features(), o.bias());
  torch::NoGradGuard no_grad;
  layer->weight.set_data(full->weight.detach().clone());
  if (o.bias()) layer->bias.set_data(full->bias.detach().clone());
  return layer;
}

}  // namespace

TpLinear column_parallel(const torch::nn::Linear& full, comm::Communicator& tp, ColumnParallelOptions options) {
  TpLinear layer = copy_of(full);
  layer->shard_columns(tp, std::move(options));
  return layer;
}

TpLinear row_parallel(const torch::nn::Linear& full, comm::Communicator& tp, RowParallelOptions options) {
  TpLinear layer = copy_of(full);
  layer->shard_rows(tp, std::move(options));
  return layer;
}

}  // namespace ds::parallel
