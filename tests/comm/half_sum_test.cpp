// bf16 / fp16 sums across ranks. Each step of a reduction widens two 16-bit values to fp32, adds, and
// rounds back to nearest-even, so a sum over N ranks is rounded N-1 times (like NCCL's ring). Checked
// two ways: (1) every implementation stays within the worst-case bound of N-1 roundings of an fp32
// (here: exact fp64) reference, |got - ref| <= (N-1) * u * sum_k |x_k| with u = 2^-8 (bf16) or
// 2^-11 (fp16), the unit roundoff; (2) the ring, whose order is fixed (chunk c is summed
// x[c+1] + x[c+2] + ... + x[c]), matches a step-by-step emulation bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "comm_test_env.h"

namespace ds::comm::test {
namespace {

double value(int rank, int64_t i) { return std::sin(double(i) * 0.731 + rank * 2.17) * (1.0 + double(i % 7)); }

float round_to(ElemType t, double x) {
  return t == ElemType::Bf16 ? bf16_to_float(float_to_bf16(float(x))) : fp16_to_float(float_to_fp16(float(x)));
}

TEST(HalfSum, WithinTheBoundOfNMinusOneRoundings) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    const int w = c.size();
    for (ElemType t : {ElemType::Bf16, ElemType::Fp16})
      for (int64_t n : {int64_t(1000), int64_t(300007)}) {
        const double u = t == ElemType::Bf16 ? 0x1p-8 : 0x1p-11;
        TypedVec x(t, n);
        for (int64_t i = 0; i < n; ++i) x.set(i, value(c.rank(), i));
        c.all_reduce(x.buf(), ReduceOp::Sum, "half_sum");
        int64_t worst = -1;
        double worst_excess = 0;
        for (int64_t i = 0; i < n; ++i) {
          double ref = 0, mag = 0;
          for (int r = 0; r < w; ++r) {
            const double xr = round_to(t, value(r, i));  // the 16-bit input, exactly
            ref += xr;
            mag += std::fabs(xr);
          }
          const double bound = double(w - 1) * u * mag;
          const double excess = std::fabs(x.get(i) - ref) - bound;
          if (excess > worst_excess) worst_excess = excess, worst = i;
        }
        EXPECT_EQ(worst, -1) << where(v, t, n) << ": element " << worst << " is " << worst_excess
                             << " beyond the (N-1)-roundings bound";
      }
  }
}

TEST(HalfSum, RingMatchesStepByStepEmulationBitForBit) {
  const Variant* ring = nullptr;
  for (const Variant& v : variants())
    if (v.name == "mpi/ring" || (v.comm->size() == 1 && v.name.rfind("world", 0) == 0)) ring = &v;
  ASSERT_NE(ring, nullptr);
  Communicator& c = *ring->comm;
  const int w = c.size();
  for (ElemType t : {ElemType::Bf16, ElemType::Fp16}) {
    const int64_t n = 10007;
    TypedVec x(t, n);
    for (int64_t i = 0; i < n; ++i) x.set(i, value(c.rank(), i));
    c.all_reduce(x.buf(), ReduceOp::Sum, "half_ring");
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; ++i) {
      const int chunk = int(std::min<int64_t>(w - 1, [&] {  // the chunk holding i: [n*c/w, n*(c+1)/w)
        int cc = 0;
        while (n * (cc + 1) / w <= i) ++cc;
        return int64_t(cc);
      }()));
      float acc = round_to(t, value((chunk + 1) % w, i));
      for (int s = 2; s <= w; ++s) acc = round_to(t, double(acc) + double(round_to(t, value((chunk + s) % w, i))));
      if (x.get(i) != double(acc)) bad = i;
    }
    EXPECT_EQ(bad, -1) << where(*ring, t, n) << ": first element that differs from the emulation";
  }
}

}  // namespace
}  // namespace ds::comm::test
