// The machine's GEMM rate per dtype as LibTorch runs it now (fp32 through the BLAS, usually
// OpenBLAS; bf16 through oneDNN, with AMX or AVX512-BF16 where the CPU has them), and the ISA oneDNN
// dispatches to. ds-report prints both; benchmarks/gemm_rate compares cores with them.
#pragma once

#include <torch/torch.h>

#include <string>

namespace ds::profiling {

// Best-of GF/s of an n x n x n torch::mm in `dtype` on the CPU, repeated for about `seconds`.
double measure_gemm_gflops(torch::ScalarType dtype, int64_t n = 1024, double seconds = 0.25);

// oneDNN's effective ISA ("Intel AVX-512 with AVX512_BF16 ... (avx512_core_bf16)"), from the
// libdnnl LibTorch loaded (dlsym; "oneDNN not loaded" when LibTorch carries its own or none).
std::string onednn_isa();

}  // namespace ds::profiling
