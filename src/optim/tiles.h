// How the optimizer kernels split a span across threads: one OpenMP region, each thread one
// contiguous range (its tile), so a pass streams each array once front to back per thread and the
// hardware prefetchers see long sequential runs. Public so benchmarks can time a reference kernel
// under exactly the same split.
#pragma once

#include <cstdint>
#include <functional>

namespace ds::optim {

// Tile boundaries are multiples of this many elements (256 bytes of fp32): an aligned span gives
// every thread aligned vectors, and only the last tile has a scalar tail.
inline constexpr std::int64_t kTileAlign = 64;
// Below this many elements per thread, forking costs more than the pass: use fewer threads.
inline constexpr std::int64_t kMinTileElems = 16384;

// Calls fn(begin, end) once per non-empty tile of [0, n), in parallel; `threads` 0 means
// omp_get_max_threads(). fn must not throw (it runs inside an OpenMP region). Called from inside
// another parallel region it runs on the calling thread (nested regions are inactive).
void for_each_tile(std::int64_t n, int threads, const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace ds::optim
