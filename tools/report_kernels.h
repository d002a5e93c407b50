// ds-report's compute-kernel rows: the BLAS (name, config, the OpenBLAS core it runs and who chose
// it), oneDNN's ISA, and a measured fp32 and bf16 GEMM rate (about half a second in all).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ds::tools {

std::vector<std::pair<std::string, std::string>> kernel_rows();

// The OpenBLAS core this process runs, after the tool's own choice at start ("" when the BLAS is not
// OpenBLAS): `ds-report --blas-core`. Started without OPENBLAS_CORETYPE, that is the core the tools
// choose on this CPU; with it, the core OpenBLAS made of the value.
std::string running_blas_core();

}  // namespace ds::tools
