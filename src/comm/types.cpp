// Names and sizes of the communication layer's plain types.
#include "comm/types.h"

#include <cstdio>

namespace ds::comm {

std::size_t elem_size(ElemType t) noexcept {
  switch (t) {
    case ElemType::Fp32: return 4;
    case ElemType::Bf16: return 2;
    case ElemType::Fp16: return 2;
    case ElemType::Fp64: return 8;
    case ElemType::Int32: return 4;
    case ElemType::Int64: return 8;
    case ElemType::UInt8: return 1;
  }
  return 1;
}

std::string_view to_string(ElemType t) noexcept {
  switch (t) {
    case ElemType::Fp32: return "fp32";
    case ElemType::Bf16: return "bf16";
    case ElemType::Fp16: return "fp16";
    case ElemType::Fp64: return "fp64";
    case ElemType::Int32: return "int32";
    case ElemType::Int64: return "int64";
    case ElemType::UInt8: return "uint8";
  }
  return "?";
}

bool is_floating(ElemType t) noexcept {
  return t == ElemType::Fp32 || t == ElemType::Bf16 || t == ElemType::Fp16 || t == ElemType::Fp64;
}

ElemType to_elem_type(ds::DType t) noexcept {
  switch (t) {
    case ds::DType::Fp16: return ElemType::Fp16;
    case ds::DType::Bf16: return ElemType::Bf16;
    case ds::DType::Fp32: return ElemType::Fp32;
  }
  return ElemType::Fp32;
}

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

std::string_view to_string(OpKind op) noexcept {
  switch (op) {
    case OpKind::AllReduce: return "all_reduce";
    case OpKind::ReduceScatter: return "reduce_scatter";
    case OpKind::AllGather: return "all_gather";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::AllToAll: return "all_to_all";
    case OpKind::Barrier: return "barrier";
    case OpKind::Split: return "split";
    case OpKind::Reduce: return "reduce";
  }
  return "?";
}

std::string_view to_string(Backend b) noexcept {
  switch (b) {
    case Backend::Auto: return "auto";
    case Backend::Single: return "single";
    case Backend::Mpi: return "mpi";
    case Backend::Nccl: return "nccl";
  }
  return "?";
}

std::string format_bytes(int64_t bytes) {
  char buf[48];
  const double b = double(bytes);
  if (bytes >= (int64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.3g GiB", b / double(1 << 30));
  else if (bytes >= (int64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.3g MiB", b / double(1 << 20));
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.3g KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

}  // namespace ds::comm
