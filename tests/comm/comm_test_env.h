// Shared by the comm_tests files: the communicators main() built once for the whole run (every rank
// runs the same tests in the same order, so collectives inside tests line up), and a typed buffer
// for writing one test over every element type.
#pragma once

#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/half.h"

namespace ds::comm::test {

// The run's communicator: MpiCommunicator (Auto algorithms) under mpirun with > 1 rank, else
// SingleCommunicator.
Communicator& world();

// Every communicator to run the generic collective tests on: world() and, under MPI, one forced to
// MPI's own calls ("native") and one forced to the ring with a tiny slice ("ring"), so both
// implementations and the ring's multi-slice path are covered at every size, and one that waits by
// sleeping ("sleep": the ring and the reduce chain of ranks on hosts of their own, comm/mpi_wait.h).
struct Variant {
  std::string name;
  Communicator* comm;
};
const std::vector<Variant>& variants();

inline const ElemType kAllTypes[] = {ElemType::Fp32, ElemType::Bf16, ElemType::Fp16, ElemType::Fp64,
                                     ElemType::Int32, ElemType::Int64, ElemType::UInt8};

// A buffer of `n` elements of `type`, read and written as doubles (exact for the small integers the
// generic tests use).
class TypedVec {
 public:
  TypedVec(ElemType type, int64_t n) : type_(type), n_(n), bytes_(size_t(n) * elem_size(type) + 1) {}
  Buffer buf() { return Buffer(bytes_.data(), n_, type_); }
  ConstBuffer cbuf() const { return ConstBuffer(bytes_.data(), n_, type_); }
  int64_t size() const { return n_; }
  ElemType type() const { return type_; }

  void set(int64_t i, double v) {
    char* p = bytes_.data() + i * int64_t(elem_size(type_));
    switch (type_) {
      case ElemType::Fp32: { float x = float(v); std::memcpy(p, &x, 4); break; }
      case ElemType::Fp64: std::memcpy(p, &v, 8); break;
      case ElemType::Int32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
      case ElemType::Int64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
      case ElemType::UInt8: { uint8_t x = uint8_t(v); std::memcpy(p, &x, 1); break; }
      case ElemType::Bf16: { uint16_t x = float_to_bf16(float(v)); std::memcpy(p, &x, 2); break; }
      case ElemType::Fp16: { uint16_t x = float_to_fp16(float(v)); std::memcpy(p, &x, 2); break; }
    }
  }
  double get(int64_t i) const {
    const char* p = bytes_.data() + i * int64_t(elem_size(type_));
    switch (type_) {
      case ElemType::Fp32: { float x; std::memcpy(&x, p, 4); return x; }
      case ElemType::Fp64: { double x; std::memcpy(&x, p, 8); return x; }
      case ElemType::Int32: { int32_t x; std::memcpy(&x, p, 4); return x; }
      case ElemType::Int64: { int64_t x; std::memcpy(&x, p, 8); return double(x); }
      case ElemType::UInt8: { uint8_t x; std::memcpy(&x, p, 1); return x; }
      case ElemType::Bf16: { uint16_t x; std::memcpy(&x, p, 2); return bf16_to_float(x); }
      case ElemType::Fp16: { uint16_t x; std::memcpy(&x, p, 2); return fp16_to_float(x); }
    }
    return 0;
  }
  std::vector<char>& raw() { return bytes_; }

 private:
  ElemType type_;
  int64_t n_;
  std::vector<char> bytes_;
};

// The value rank `rank` contributes at index i: a small integer, exact in every type, whose sum
// over up to 8 ranks stays exact too (|sum| <= 40; uint8 sees 0..10 per rank).
inline double sample(ElemType t, int rank, int64_t i) {
  const double v = double((i * 7 + rank * 3 + 1) % 11);
  return t == ElemType::UInt8 ? v : v - 5;
}

// Prefix for failure messages: which communicator, type and size a loop iteration was testing.
inline std::string where(const Variant& v, ElemType t, int64_t n) {
  return v.name + " " + std::string(to_string(t)) + " n=" + std::to_string(n) + " rank " +
         std::to_string(v.comm->rank());
}

// Checks got(i) == want(i) for i < n and reports the first mismatch. Tests use EXPECT (not ASSERT)
// around collectives so a failing rank still issues the same collectives as the others.
template <class Got, class Want>
::testing::AssertionResult all_equal(int64_t n, Got got, Want want) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = got(i), w = want(i);
    if (!(g == w)) return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ds::comm::test
