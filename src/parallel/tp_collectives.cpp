#include "parallel/tp_collectives.h"

#include <cstdint>

#include "nn/tensor_buffer.h"
#include "parallel/autograd_group.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor all_reduce_sum(const torch::Tensor& x, comm::Communicator& tp) {
  torch::Tensor out = x.contiguous().clone();
  tp.all_reduce(nn::as_buffer(out), comm::ReduceOp::Sum, "tp_all_reduce");
  return out;
}

torch::Tensor slice_last(const torch::Tensor& x, comm::Communicator& tp) {
  const int64_t d = x.size(-1);
  DS_CHECK(d % tp.size() == 0, Error,
           "tensor parallelism: a last dimension of " + std::to_string(d) + " does not split over " +
               std::to_string(tp.size()) + " ranks");
  const int64_t n = d / tp.size();
  return x.narrow(-1, tp.rank() * n, n).contiguous();
}

torch::Tensor gather_last(const torch::Tensor& x, comm::Communicator& tp) {
  const torch::Tensor mine = x.contiguous();
  std::vector<int64_t> shape{tp.size()};
  for (int64_t s : mine.sizes()) shape.push_back(s);
  torch::Tensor all = torch::empty(shape, mine.options());  // [tp, ..., d]: rank r's block at r
  tp.all_gather(nn::as_buffer(mine), nn::as_buffer(all), "tp_all_gather");
  std::vector<int64_t> out_shape(mine.sizes().begin(), mine.sizes().end());
  out_shape.back() *= tp.size();
  return all.movedim(0, -2).reshape(out_shape);  // [..., tp, d] → [..., tp·d]
}

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, comm::Communicator* tp) {
    save_group(ctx, *tp);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_reduce_sum(g[0], saved_group(ctx)), torch::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static torch::Tensor forward(AutogradContext*, const torch::Tensor& x, comm::Communicator* tp) {
    return all_reduce_sum(x, *tp);
  }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], torch::Tensor()}; }
};

struct ScatterToRegion : torch::autograd::Function<ScatterToRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, comm::Communicator* tp) {
    save_group(ctx, *tp);
    return slice_last(x, *tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {gather_last(g[0], saved_group(ctx)), torch::Tensor()};
  }
};

struct GatherFromRegion : torch::autograd::Function<GatherFromRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, comm::Communicator* tp) {
    save_group(ctx, *tp);
    return gather_last(x, *tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {slice_last(g[0], saved_group(ctx)), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor copy_to_tp_region(const torch::Tensor& x, comm::Communicator& tp) {
  return tp.size() == 1 ? x : CopyToRegion::apply(x, &tp);
}

torch::Tensor reduce_from_tp_region(const torch::Tensor& x, comm::Communicator& tp) {
  return tp.size() == 1 ? x : ReduceFromRegion::apply(x, &tp);
}

torch::Tensor scatter_to_tp_region(const torch::Tensor& x, comm::Communicator& tp) {
  return tp.size() == 1 ? x : ScatterToRegion::apply(x, &tp);
}

torch::Tensor gather_from_tp_region(const torch::Tensor& x, comm::Communicator& tp) {
  return tp.size() == 1 ? x : GatherFromRegion::apply(x, &tp);
}

}  // namespace ds::parallel
