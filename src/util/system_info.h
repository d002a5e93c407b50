// Facts about this machine that the engine's budget checks and ds-report need.
#pragma once

#include <cstdint>
#include <string>

namespace ds {

struct CpuIsa {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bf16 = false;
  std::string best() const;  // "avx512", "avx2", or "scalar"
};

CpuIsa detect_cpu_isa();
int cpu_cores();                        // online logical CPUs
std::uint64_t mem_available_bytes();    // /proc/meminfo MemAvailable (0 if unknown)
std::uint64_t mem_total_bytes();        // /proc/meminfo MemTotal (0 if unknown)
std::uint64_t memlock_limit_bytes();    // RLIMIT_MEMLOCK soft limit (UINT64_MAX = unlimited)
std::uint64_t shm_size_bytes();         // size of /dev/shm (0 if absent)
std::uint64_t current_rss_bytes();      // resident set of this process
std::uint64_t peak_rss_bytes();         // peak resident set of this process
// Restarts the peak at the current resident set (Linux >= 4.0: /proc/self/clear_refs "5");
// false where that is refused, and peak_rss_bytes() stays the whole run's.
bool reset_peak_rss();
// Gives the heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere). glibc keeps
// freed chunks of a few MB in its heap, so building and dropping tensors one at a time (a pipeline
// stage's build) would otherwise leave the process holding what it freed.
void release_free_heap_memory();
std::string compiler_version();

// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(std::uint64_t bytes);

}  // namespace ds
