// Transparent huge pages for LibTorch's large CPU tensors (util/host_alloc.h says why: measured
// here, zero-filling a new 100 MB tensor takes 0.20 s with 4 KiB pages and 0.007 s with 2 MiB
// pages). Stage 3 and offload allocate large, short-lived tensors every layer (gathered parameters,
// gradients, activations), so without huge pages a ZeRO-Infinity step spends most of its time in
// the kernel's fault handler.
//
// enable_huge_pages_for_cpu_tensors() installs, once per process, a LibTorch CPU allocator that
// gives allocations of >= 4 MiB 2 MiB-aligned memory advised MADV_HUGEPAGE (smaller ones go to the
// allocator it replaces). It does nothing when the kernel's THP mode is "never" or DS_HUGE_PAGES=0.
// Memory is freed with free(), like LibTorch's own CPU allocator, so tensors made before and after
// the switch mix freely.
#pragma once

#include <string>

namespace ds::offload {

// The kernel's THP mode ("always", "madvise", "never"; "" when unknown).
std::string thp_mode();

// Returns a line saying what is in effect (for the engine's log); the first call decides.
std::string enable_huge_pages_for_cpu_tensors();

}  // namespace ds::offload
