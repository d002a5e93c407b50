// DeepSpeed's per-functional FLOP formulas, keyed by aten operator name instead of by the Python
// function DeepSpeed patches (the aten op is what a LibTorch RecordFunction callback sees).
#include "profiling/op_flops.h"

#include <ATen/core/List.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>

namespace ds::profiling {
namespace {

enum class Formula {
  kLinear,       // 2·numel(input)·out_features; bias not counted (DeepSpeed)
  kMatmul,       // 2·numel(a)·b[-1] (matmul, mm, bmm)
  kAddmm,        // 2·numel(m1)·m2[-1] + numel(self) (addmm, baddbmm)
  kPerElement,   // numel(input)·per_element: activations, softmax, pooling (1)
  kNorm,         // numel(input)·(5 with an affine weight, else 4)
  kRmsNorm,      // 2·numel(input) + rows: the two products and the eps add of the unfused form
  kBatchNorm,    // training: as kNorm; eval: numel·(2 with weight, else 1)
  kElementwise,  // numel of the broadcast shape of (self, other): add, mul
  kEinsum,       // numpy's einsum_path cost of one contraction
  kZero,         // embedding, dropout: counted, cost 0
};

struct OpEntry {
  OpKind kind;
  Formula formula;
  int weight_arg = -1;  // kNorm / kBatchNorm: index of the optional affine weight
  int per_element = 1;  // kPerElement: FLOPs per input element
};

const std::map<std::string, OpEntry, std::less<>>& op_table() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, OpEntry, std::less<>>();
    auto add = [t](const char* name, Formula f, int weight_arg = -1, int per_element = 1) {
      (*t)[name] = OpEntry{OpKind::kCounted, f, weight_arg, per_element};
    };
    add("aten::linear", Formula::kLinear);
    for (const char* n : {"aten::matmul", "aten::mm", "aten::bmm", "ds::batched_matmul"}) add(n, Formula::kMatmul);
    for (const char* n : {"aten::addmm", "aten::baddbmm"}) add(n, Formula::kAddmm);
    for (const char* n : {"aten::relu", "aten::relu_", "aten::prelu", "aten::elu", "aten::elu_",
                          "aten::leaky_relu", "aten::leaky_relu_", "aten::relu6", "aten::relu6_",
                          "aten::hardtanh", "aten::hardtanh_", "aten::silu", "aten::silu_",
                          "aten::gelu", "aten::gelu_", "aten::softmax", "aten::_softmax",
                          "aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d",
                          "aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d",
                          "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d",
                          "aten::adaptive_avg_pool3d", "aten::adaptive_max_pool1d",
                          "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d"}) {
      add(n, Formula::kPerElement);
    }
    add("aten::layer_norm", Formula::kNorm, 2);     // (input, normalized_shape, weight?, ...)
    // nn/fused_ops.h's operators, counted as the LibTorch operators they fuse would be.
    for (const char* n : {"ds::gelu_tanh", "ds::causal_softmax"}) add(n, Formula::kPerElement);
    add("ds::layer_norm", Formula::kNorm, 1);  // (input, weight, bias)
    add("ds::rms_norm", Formula::kRmsNorm);
    add("ds::swiglu", Formula::kPerElement, -1, 2);  // silu, the product with up
    add("ds::rotary", Formula::kPerElement, -1, 3);  // two products and their sum
    add("aten::group_norm", Formula::kNorm, 2);     // (input, num_groups, weight?, ...)
    add("aten::instance_norm", Formula::kNorm, 1);  // (input, weight?, bias?, ...)
    add("aten::batch_norm", Formula::kBatchNorm, 1);
    for (const char* n : {"aten::add", "aten::mul"}) add(n, Formula::kElementwise);
    add("aten::einsum", Formula::kEinsum);
    for (const char* n : {"aten::embedding", "aten::dropout", "aten::dropout_",
                          "aten::feature_dropout", "aten::alpha_dropout"}) {
      add(n, Formula::kZero);
    }
    for (const char* n : {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution",
                          "aten::_convolution", "aten::conv_transpose1d", "aten::conv_transpose2d",
                          "aten::conv_transpose3d"}) {
      (*t)[n] = OpEntry{OpKind::kConvolution, Formula::kZero, -1};
    }
    return t;
  }();
  return *table;
}

const c10::IValue* arg(c10::ArrayRef<c10::IValue> inputs, size_t i) {
  return i < inputs.size() ? &inputs[i] : nullptr;
}

bool is_tensor(const c10::IValue* v) { return v && v->isTensor() && v->toTensor().defined(); }

int64_t numel_of(const c10::IValue* v) { return is_tensor(v) ? v->toTensor().numel() : 0; }

int64_t last_dim(const c10::IValue* v) {
  if (!is_tensor(v)) return 0;
  const auto& t = v->toTensor();
  return t.dim() == 0 ? 1 : t.size(-1);
}

// One FLOP per element of the result: a scalar operand costs the other's numel; two tensors the
// numel of their broadcast shape. (DeepSpeed's _elementwise_flops_compute aligns the shapes at
// the leading dimension, which overcounts [B,T,C] + [T,C]; ours aligns at the trailing one, as
// broadcasting does; equal ranks give the same count.)
int64_t elementwise_flops(const c10::IValue* a, const c10::IValue* b) {
  if (!is_tensor(a)) return is_tensor(b) ? numel_of(b) : 1;
  if (!is_tensor(b)) return numel_of(a);
  auto sa = a->toTensor().sizes(), sb = b->toTensor().sizes();
  const size_t rank = std::max(sa.size(), sb.size());
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {  // i counts from the last dimension
    const int64_t x = i < sa.size() ? sa[sa.size() - 1 - i] : 1;
    const int64_t y = i < sb.size() ? sb[sb.size() - 1 - i] : 1;
    n *= std::max(x, y);
  }
  return n;
}

// numpy's _flop_count for one contraction of all operands: prod(sizes of every index) ·
// (max(1, operands - 1) + 1 if an index is summed away). Two operands is what DeepSpeed's
// np.einsum_path(optimize="optimal") reports; with more, this is the unoptimised cost.
// Equations with "..." are not counted.
int64_t einsum_flops(c10::ArrayRef<c10::IValue> inputs) {
  const c10::IValue* eq = arg(inputs, 0);
  const c10::IValue* ops = arg(inputs, 1);
  if (!eq || !eq->isString() || !ops || !ops->isTensorList()) return 0;
  std::string equation;
  for (char c : eq->toStringRef()) if (c != ' ') equation += c;
  if (equation.find('.') != std::string::npos) return 0;
  const auto arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::array<int64_t, 128> size{};
  std::array<int, 128> seen{};
  const auto tensors = ops->toTensorList();
  size_t operand = 0, axis = 0;
  for (char c : lhs) {
    if (c == ',') { ++operand; axis = 0; continue; }
    if (operand >= tensors.size()) return 0;
    const at::Tensor t = tensors.get(operand);
    if (axis >= static_cast<size_t>(t.dim())) return 0;
    size[static_cast<unsigned char>(c) & 127] = t.size(static_cast<int64_t>(axis++));
    ++seen[static_cast<unsigned char>(c) & 127];
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = equation.substr(arrow + 2);
  } else {
    for (int c = 0; c < 128; ++c) if (seen[c] == 1) out += static_cast<char>(c);
  }
  int64_t overall = 1;
  bool inner = false;
  for (int c = 0; c < 128; ++c) {
    if (!seen[c]) continue;
    overall *= size[c];
    if (out.find(static_cast<char>(c)) == std::string::npos) inner = true;
  }
  const int64_t terms = static_cast<int64_t>(tensors.size());
  return overall * (std::max<int64_t>(1, terms - 1) + (inner ? 1 : 0));
}

}  // namespace

OpKind op_kind(std::string_view op_name) {
  const auto& t = op_table();
  auto it = t.find(op_name);
  return it == t.end() ? OpKind::kIgnored : it->second.kind;
}

OpCost op_cost(std::string_view op_name, c10::ArrayRef<c10::IValue> inputs) {
  const auto& t = op_table();
  auto it = t.find(op_name);
  if (it == t.end() || it->second.kind != OpKind::kCounted) return {};
  const OpEntry& e = it->second;
  const c10::IValue* a0 = arg(inputs, 0);
  const c10::IValue* a1 = arg(inputs, 1);
  const c10::IValue* a2 = arg(inputs, 2);
  switch (e.formula) {
    case Formula::kLinear: {  // (input [*, in], weight [out, in], bias?)
      if (!is_tensor(a1)) return {};
      const int64_t macs = numel_of(a0) * a1->toTensor().size(0);
      return {2 * macs, macs};
    }
    case Formula::kMatmul: {  // (self, other); a 1-D other is a dot per row, not DeepSpeed's K²
      if (!is_tensor(a0) || !is_tensor(a1)) return {};
      const int64_t per_row = a1->toTensor().dim() == 1 ? 1 : last_dim(a1);
      const int64_t macs = numel_of(a0) * per_row;
      return {2 * macs, macs};
    }
    case Formula::kAddmm: {  // (self, mat1, mat2, beta, alpha)
      const int64_t macs = numel_of(a1) * last_dim(a2);
      return {2 * macs + numel_of(a0), macs};
    }
    case Formula::kPerElement:
      return {numel_of(a0) * e.per_element, 0};
    case Formula::kNorm:
      return {numel_of(a0) * (is_tensor(arg(inputs, e.weight_arg)) ? 5 : 4), 0};
    case Formula::kRmsNorm:
      return {2 * numel_of(a0) + (last_dim(a0) > 0 ? numel_of(a0) / last_dim(a0) : 0), 0};
    case Formula::kBatchNorm: {  // (input, weight?, bias?, mean?, var?, training, ...)
      const bool affine = is_tensor(arg(inputs, 1));
      const c10::IValue* training = arg(inputs, 5);
      const bool train = training && training->isBool() && training->toBool();
      return {numel_of(a0) * (train ? (affine ? 5 : 4) : (affine ? 2 : 1)), 0};
    }
    case Formula::kElementwise:
      return {elementwise_flops(a0, a1), 0};
    case Formula::kEinsum:
      return {einsum_flops(inputs), 0};
    case Formula::kZero:
      return {};
  }
  return {};
}

bool conv_is_transposed(std::string_view op_name, c10::ArrayRef<c10::IValue> inputs) {
  if (op_name.rfind("aten::conv_transpose", 0) == 0) return true;
  if (op_name == "aten::convolution" || op_name == "aten::_convolution") {
    const c10::IValue* t = arg(inputs, 6);  // (input, weight, bias, stride, padding, dilation, transposed, ...)
    return t && t->isBool() && t->toBool();
  }
  return false;
}

OpCost conv_cost(const ConvShapes& s) {
  if (s.input.size() < 3 || s.weight.size() != s.input.size() || s.output.size() != s.input.size()) {
    return {};
  }
  const int64_t batch = s.input[0], in_channels = s.input[1], out_channels = s.output[1];
  int64_t kernel = 1, in_positions = 1, out_positions = 1;
  for (size_t d = 2; d < s.input.size(); ++d) {
    kernel *= s.weight[d];
    in_positions *= s.input[d];
    out_positions *= s.output[d];
  }
  // weight[1] is Cin/groups (normal) or Cout/groups (transposed); DeepSpeed's per-position MACs
  // prod(k)·Cin·(Cout/groups) equals prod(k)·(Cin/groups)·Cout for the normal case.
  const int64_t per_position = s.transposed ? kernel * in_channels * s.weight[1]
                                            : kernel * s.weight[1] * out_channels;
  const int64_t macs = per_position * batch * (s.transposed ? in_positions : out_positions);
  const int64_t bias = s.has_bias ? out_channels * batch * out_positions : 0;
  return {2 * macs + bias, macs};
}

}  // namespace ds::profiling
