// Plain types of the communication layer: element types, buffer descriptors, reduce ops and
// collective kinds. No LibTorch: a buffer is a pointer, an element count and an element type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/precision_config.h"  // ds::DType (fp16 / bf16 / fp32 from the config)

namespace ds::comm {

// Element types a collective can carry. Fp16 and Bf16 are raw uint16_t bit patterns.
enum class ElemType : uint8_t { Fp32, Bf16, Fp16, Fp64, Int32, Int64, UInt8 };

std::size_t elem_size(ElemType t) noexcept;
std::string_view to_string(ElemType t) noexcept;
bool is_floating(ElemType t) noexcept;
ElemType to_elem_type(ds::DType t) noexcept;  // the config's communication_data_type

// A contiguous buffer the collective writes (and may read).
struct Buffer {
  void* data = nullptr;
  int64_t count = 0;  // elements, not bytes
  ElemType type = ElemType::Fp32;

  Buffer() = default;
  Buffer(void* d, int64_t n, ElemType t) : data(d), count(n), type(t) {}
  Buffer(void* d, int64_t n, ds::DType t) : data(d), count(n), type(to_elem_type(t)) {}
  Buffer(float* d, int64_t n) : data(d), count(n), type(ElemType::Fp32) {}
  Buffer(double* d, int64_t n) : data(d), count(n), type(ElemType::Fp64) {}
  Buffer(int32_t* d, int64_t n) : data(d), count(n), type(ElemType::Int32) {}
  Buffer(int64_t* d, int64_t n) : data(d), count(n), type(ElemType::Int64) {}
  Buffer(uint8_t* d, int64_t n) : data(d), count(n), type(ElemType::UInt8) {}
  // uint16_t is ambiguous (bf16 or fp16): say which with the (void*, n, type) form.

  int64_t bytes() const noexcept { return count * int64_t(elem_size(type)); }
  // Elements [offset, offset + n) of this buffer.
  Buffer slice(int64_t offset, int64_t n) const noexcept {
    return Buffer(static_cast<char*>(data) + offset * int64_t(elem_size(type)), n, type);
  }
};

// A contiguous buffer the collective only reads. Any Buffer converts to one.
struct ConstBuffer {
  const void* data = nullptr;
  int64_t count = 0;
  ElemType type = ElemType::Fp32;

  ConstBuffer() = default;
  ConstBuffer(const void* d, int64_t n, ElemType t) : data(d), count(n), type(t) {}
  ConstBuffer(const void* d, int64_t n, ds::DType t) : data(d), count(n), type(to_elem_type(t)) {}
  ConstBuffer(const Buffer& b) : data(b.data), count(b.count), type(b.type) {}  // NOLINT: implicit
  ConstBuffer(const float* d, int64_t n) : data(d), count(n), type(ElemType::Fp32) {}
  ConstBuffer(const double* d, int64_t n) : data(d), count(n), type(ElemType::Fp64) {}
  ConstBuffer(const int32_t* d, int64_t n) : data(d), count(n), type(ElemType::Int32) {}
  ConstBuffer(const int64_t* d, int64_t n) : data(d), count(n), type(ElemType::Int64) {}
  ConstBuffer(const uint8_t* d, int64_t n) : data(d), count(n), type(ElemType::UInt8) {}

  int64_t bytes() const noexcept { return count * int64_t(elem_size(type)); }
  ConstBuffer slice(int64_t offset, int64_t n) const noexcept {
    return ConstBuffer(static_cast<const char*>(data) + offset * int64_t(elem_size(type)), n, type);
  }
};

// Average is not an op: all-reduce with Sum, then scale (see gradients.h / kernels.h).
enum class ReduceOp : uint8_t { Sum, Max, Min };
std::string_view to_string(ReduceOp op) noexcept;

// Split: Communicator::split (a collective that makes sub-communicators; logged like the others).
enum class OpKind : uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, AllToAll, Barrier, Split, Reduce };
std::string_view to_string(OpKind op) noexcept;

// Which backend make_communicator builds. Auto: Mpi when launched by mpirun with more than one
// rank (OMPI_COMM_WORLD_SIZE / PMI_SIZE > 1), else Single.
enum class Backend : uint8_t { Auto, Single, Mpi, Nccl };
std::string_view to_string(Backend b) noexcept;

// "64 MiB", "12 B": byte counts in messages and the collective log.
std::string format_bytes(int64_t bytes);

}  // namespace ds::comm
