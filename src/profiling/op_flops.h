// The FLOP and MAC count of one aten operator from its input shapes, with DeepSpeed's formulas
// (deepspeed/profiling/flops_profiler/profiler.py, the `_*_flops_compute` functions): a linear
// layer is 2·MACs and ignores its bias, addmm/baddbmm add one FLOP per element of the added
// tensor, activations, softmax and pooling cost one FLOP per input element, layer/group/instance
// norm five (four without an affine weight), embedding and dropout nothing, add/mul one per
// element of the broadcast result. Everything else costs nothing (view, div, masked_fill, ...).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string_view>

namespace ds::profiling {

struct OpCost {
  int64_t flops = 0;
  int64_t macs = 0;
};

// How an operator is counted. Convolutions need the output's spatial size, which only the end
// of the call knows, so they are counted in two halves (conv_cost).
enum class OpKind { kIgnored, kCounted, kConvolution };

OpKind op_kind(std::string_view op_name);

// Cost of a kCounted operator called with `inputs` (its boxed arguments, in schema order).
// Unknown names and malformed arguments cost {0, 0}: counting must never break a forward pass.
OpCost op_cost(std::string_view op_name, c10::ArrayRef<c10::IValue> inputs);

// Cost of a convolution: input [N, Cin, *in], weight [Cout, Cin/groups, *k] (transposed:
// [Cin, Cout/groups, *k]), output [N, Cout, *out]. MACs = prod(k)·Cin·(Cout/groups)·N·prod(out)
// (transposed: prod(k)·Cin·(Cout/groups)·N·prod(in)); FLOPs = 2·MACs + Cout·N·prod(out) with bias.
struct ConvShapes {
  c10::IntArrayRef input, weight, output;  // must outlive the call
  bool has_bias = false;
  bool transposed = false;
};
OpCost conv_cost(const ConvShapes& shapes);

// Whether the convolution named `op_name`, called with `inputs`, is a transposed one.
bool conv_is_transposed(std::string_view op_name, c10::ArrayRef<c10::IValue> inputs);

}  // namespace ds::profiling
