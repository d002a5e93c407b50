// comm/kernels.h: the element-wise reduction and scaling every backend and helper relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "comm/half.h"
#include "comm/kernels.h"
#include "util/error.h"

namespace ds::comm {
namespace {

TEST(Kernels, ReducesEveryTypeAndOp) {
  for (ElemType t : {ElemType::Fp32, ElemType::Fp64, ElemType::Int32, ElemType::Int64, ElemType::Bf16,
                     ElemType::Fp16}) {
    std::vector<double> a = {1, -2, 3, 0}, b = {4, 5, -6, 0};
    std::vector<char> ma(4 * elem_size(t)), mb(4 * elem_size(t)), md(4 * elem_size(t));
    auto put = [&](std::vector<char>& m, const std::vector<double>& v) {
      for (size_t i = 0; i < v.size(); ++i) {
        char* p = m.data() + i * elem_size(t);
        switch (t) {
          case ElemType::Fp32: { float x = float(v[i]); std::memcpy(p, &x, 4); break; }
          case ElemType::Fp64: std::memcpy(p, &v[i], 8); break;
          case ElemType::Int32: { int32_t x = int32_t(v[i]); std::memcpy(p, &x, 4); break; }
          case ElemType::Int64: { int64_t x = int64_t(v[i]); std::memcpy(p, &x, 8); break; }
          case ElemType::Bf16: { uint16_t x = float_to_bf16(float(v[i])); std::memcpy(p, &x, 2); break; }
          case ElemType::Fp16: { uint16_t x = float_to_fp16(float(v[i])); std::memcpy(p, &x, 2); break; }
          default: break;
        }
      }
    };
    auto get = [&](const std::vector<char>& m, size_t i) -> double {
      const char* p = m.data() + i * elem_size(t);
      switch (t) {
        case ElemType::Fp32: { float x; std::memcpy(&x, p, 4); return x; }
        case ElemType::Fp64: { double x; std::memcpy(&x, p, 8); return x; }
        case ElemType::Int32: { int32_t x; std::memcpy(&x, p, 4); return x; }
        case ElemType::Int64: { int64_t x; std::memcpy(&x, p, 8); return double(x); }
        case ElemType::Bf16: { uint16_t x; std::memcpy(&x, p, 2); return bf16_to_float(x); }
        case ElemType::Fp16: { uint16_t x; std::memcpy(&x, p, 2); return fp16_to_float(x); }
        default: return 0;
      }
    };
    put(ma, a);
    put(mb, b);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
      reduce_elements(md.data(), ma.data(), mb.data(), 4, t, op);
      for (size_t i = 0; i < 4; ++i) {
        const double want = op == ReduceOp::Sum ? a[i] + b[i] : op == ReduceOp::Max ? std::max(a[i], b[i])
                                                                                   : std::min(a[i], b[i]);
        EXPECT_EQ(get(md, i), want) << to_string(t) << " " << to_string(op) << " i=" << i;
      }
    }
    reduce_elements(ma.data(), ma.data(), mb.data(), 4, t, ReduceOp::Sum);  // dst aliases a
    EXPECT_EQ(get(ma, 2), -3.0) << to_string(t);
  }
}

TEST(Kernels, UInt8SumWrapsLikeTorch) {
  uint8_t a[2] = {200, 1}, b[2] = {100, 2}, d[2];
  reduce_elements(d, a, b, 2, ElemType::UInt8, ReduceOp::Sum);
  EXPECT_EQ(d[0], uint8_t(44));
  EXPECT_EQ(d[1], uint8_t(3));
}

TEST(Kernels, Bf16SumRoundsOncePerAddToNearestEven) {
  // 1 + 2^-8 is half-way between two bf16 values: the pairwise sum rounds to the even one (1.0).
  uint16_t a = float_to_bf16(1.0f), b = float_to_bf16(0x1p-8f), d = 0;
  reduce_elements(&d, &a, &b, 1, ElemType::Bf16, ReduceOp::Sum);
  EXPECT_EQ(bf16_to_float(d), 1.0f);
  // 3 * 2^-9 past 1 is above half-way: rounds up to 1 + 2^-7.
  b = float_to_bf16(0x1.8p-8f);
  reduce_elements(&d, &a, &b, 1, ElemType::Bf16, ReduceOp::Sum);
  EXPECT_EQ(bf16_to_float(d), 1.0f + 0x1p-7f);
  // fp16: 65504 + 16 is half-way to 65536 -> inf (ties to even); 2048 + 1 -> 2048.
  uint16_t h1 = float_to_fp16(65504.0f), h2 = float_to_fp16(16.0f), hd = 0;
  reduce_elements(&hd, &h1, &h2, 1, ElemType::Fp16, ReduceOp::Sum);
  EXPECT_TRUE(std::isinf(fp16_to_float(hd)));
  h1 = float_to_fp16(2048.0f);
  h2 = float_to_fp16(1.0f);
  reduce_elements(&hd, &h1, &h2, 1, ElemType::Fp16, ReduceOp::Sum);
  EXPECT_EQ(fp16_to_float(hd), 2048.0f);
}

TEST(Kernels, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float a[2] = {nan, 1.0f}, b[2] = {1.0f, nan}, d[2];
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    reduce_elements(d, a, b, 2, ElemType::Fp32, op);
    EXPECT_TRUE(std::isnan(d[0]) && std::isnan(d[1])) << to_string(op);
  }
}

TEST(Kernels, ScaleRoundsTheFactorToFp32LikeTorchMul) {
  float x[1] = {3.0f};
  scale_elements(Buffer(x, 1), 1.0 / 3.0);
  EXPECT_EQ(x[0], 3.0f * float(1.0 / 3.0));  // 1.0000000298 rounded: 1.0f exactly
  double y[1] = {3.0};
  scale_elements(Buffer(y, 1), 1.0 / 3.0);
  EXPECT_EQ(y[0], 3.0 * (1.0 / 3.0));
  uint16_t h[1] = {float_to_bf16(3.0f)};
  scale_elements(Buffer(h, 1, ElemType::Bf16), 0.1);
  EXPECT_EQ(h[0], float_to_bf16(3.0f * 0.1f));
  uint16_t f[1] = {float_to_fp16(7.0f)};
  divide_elements(Buffer(f, 1, ElemType::Fp16), 3);
  EXPECT_EQ(f[0], float_to_fp16(7.0f / 3.0f));
  float z[1] = {1.0f};
  divide_elements(Buffer(z, 1), 3);
  EXPECT_EQ(z[0], 1.0f / 3.0f);  // a true division, not a multiply by fp32(1/3)
  int64_t i[1] = {4};
  EXPECT_THROW(scale_elements(Buffer(i, 1), 0.5), NotSupported);
}

}  // namespace
}  // namespace ds::comm
