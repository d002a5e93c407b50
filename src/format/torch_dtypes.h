// LibTorch's scalar types and safetensors' dtypes, one table for every torch-aware reader and writer
// (checkpoint files, Hugging Face weights). Header-only, so ds_format itself stays torch-free and
// fuzzable; each caller raises its own error (with its file and tensor) for an empty result.
#pragma once

#include <torch/torch.h>

#include <array>
#include <optional>
#include <utility>

#include "format/safetensors.h"

namespace ds::format {

inline constexpr std::array<std::pair<torch::ScalarType, StDtype>, 10> kTorchStDtypes = {{
    {torch::kFloat64, StDtype::F64}, {torch::kFloat32, StDtype::F32}, {torch::kFloat16, StDtype::F16},
    {torch::kBFloat16, StDtype::BF16}, {torch::kInt64, StDtype::I64}, {torch::kInt32, StDtype::I32},
    {torch::kInt16, StDtype::I16}, {torch::kInt8, StDtype::I8}, {torch::kUInt8, StDtype::U8},
    {torch::kBool, StDtype::BOOL},
}};

// nullopt for a LibTorch dtype safetensors has no name for (complex, quantized).
inline std::optional<StDtype> to_st_dtype(torch::ScalarType t) {
  for (const auto& [torch_type, st] : kTorchStDtypes)
    if (torch_type == t) return st;
  return std::nullopt;
}

// nullopt for a safetensors dtype LibTorch 1.13 cannot hold (U16, U32, U64, F8 variants).
inline std::optional<torch::ScalarType> to_scalar_type(StDtype d) {
  for (const auto& [torch_type, st] : kTorchStDtypes)
    if (st == d) return torch_type;
  return std::nullopt;
}

}  // namespace ds::format
