// ds-report's compute-kernel rows: the BLAS (name, config, the OpenBLAS core it runs and who chose
// it), oneDNN's ISA, and a measured fp32 and bf16 GEMM rate (about half a second in all).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ds::tools {

std::vector<std::pair<std::string, std::string>> kernel_rows();

// The OPENBLAS_CORETYPE the tools choose on this CPU when the user sets none ("" when none is
// better than OpenBLAS's own pick, or the BLAS is not OpenBLAS): `ds-report --blas-core`.
std::string chosen_blas_core();

}  // namespace ds::tools
