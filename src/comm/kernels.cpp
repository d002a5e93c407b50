// Reduction and scaling loops over raw buffers, one instantiation per element type. Written so GCC
// vectorizes the fp32 paths; the 16-bit paths convert with comm/half.h.
#include "comm/kernels.h"

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "comm/half.h"
#include "util/error.h"

namespace ds::comm {
namespace {

struct SumOp {
  template <class T> T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {  // NaN in either input gives NaN, like torch.maximum
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a > b || std::isnan(a)) ? a : b;
    else return a > b ? a : b;
  }
};
struct MinOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return (a < b || std::isnan(a)) ? a : b;
    else return a < b ? a : b;
  }
};

template <class T, class Op>
void combine(void* dst, const void* a, const void* b, int64_t n, Op op) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) d[i] = op(x[i], y[i]);
}

template <float (*Load)(uint16_t) noexcept, uint16_t (*Store)(float) noexcept, class Op>
void combine16(void* dst, const void* a, const void* b, int64_t n, Op op) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (int64_t i = 0; i < n; ++i) d[i] = Store(op(Load(x[i]), Load(y[i])));
}

template <class Op>
void dispatch(void* dst, const void* a, const void* b, int64_t n, ElemType type, Op op) {
  switch (type) {
    case ElemType::Fp32: return combine<float>(dst, a, b, n, op);
    case ElemType::Fp64: return combine<double>(dst, a, b, n, op);
    case ElemType::Int32: return combine<int32_t>(dst, a, b, n, op);
    case ElemType::Int64: return combine<int64_t>(dst, a, b, n, op);
    case ElemType::UInt8: return combine<uint8_t>(dst, a, b, n, op);
    case ElemType::Bf16: return combine16<bf16_to_float, float_to_bf16>(dst, a, b, n, op);
    case ElemType::Fp16: return combine16<fp16_to_float, float_to_fp16>(dst, a, b, n, op);
  }
}

struct Mul {
  template <class T> T operator()(T x, T s) const { return x * s; }
};
struct Div {
  template <class T> T operator()(T x, T s) const { return x / s; }
};

template <float (*Load)(uint16_t) noexcept, uint16_t (*Store)(float) noexcept, class Op>
void scale16(void* data, int64_t n, float s, Op op) {
  uint16_t* p = static_cast<uint16_t*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] = Store(op(Load(p[i]), s));
}

template <class T, class Op>
void scale_plain(void* data, int64_t n, T s, Op op) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] = op(p[i], s);
}

// x op factor for every element; the factor is rounded to fp32 except for fp64 buffers.
template <class Op>
void scale_any(Buffer buf, double factor, const char* what, Op op) {
  DS_CHECK(is_floating(buf.type), NotSupported,
           std::string("comm: ") + what + " a " + std::string(to_string(buf.type)) +
               " buffer is not supported (only fp32, fp64, bf16 and fp16 buffers)");
  if (buf.count <= 0) return;
  const float s = static_cast<float>(factor);
  switch (buf.type) {
    case ElemType::Fp32: return scale_plain<float>(buf.data, buf.count, s, op);
    case ElemType::Fp64: return scale_plain<double>(buf.data, buf.count, factor, op);
    case ElemType::Bf16: return scale16<bf16_to_float, float_to_bf16>(buf.data, buf.count, s, op);
    case ElemType::Fp16: return scale16<fp16_to_float, float_to_fp16>(buf.data, buf.count, s, op);
    default: return;
  }
}

}  // namespace

void reduce_elements(void* dst, const void* a, const void* b, int64_t n, ElemType type, ReduceOp op) {
  if (n <= 0) return;
  switch (op) {
    case ReduceOp::Sum: return dispatch(dst, a, b, n, type, SumOp{});
    case ReduceOp::Max: return dispatch(dst, a, b, n, type, MaxOp{});
    case ReduceOp::Min: return dispatch(dst, a, b, n, type, MinOp{});
  }
}

void scale_elements(Buffer buf, double factor) { scale_any(buf, factor, "scaling", Mul{}); }

void divide_elements(Buffer buf, double divisor) { scale_any(buf, divisor, "dividing", Div{}); }

void copy_elements(Buffer dst, ConstBuffer src) {
  DS_ASSERT(dst.type == src.type && dst.count == src.count, "copy_elements: mismatched buffers");
  if (dst.data != src.data && src.count > 0) std::memmove(dst.data, src.data, size_t(src.bytes()));
}

void zero_elements(Buffer buf) {
  if (buf.count > 0) std::memset(buf.data, 0, size_t(buf.bytes()));
}

}  // namespace ds::comm
