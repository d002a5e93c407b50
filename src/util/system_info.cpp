#include "util/system_info.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace ds {

std::string CpuIsa::best() const {
  if (avx512f) return "avx512";
  if (avx2 && fma) return "avx2";
  return "scalar";
}

CpuIsa detect_cpu_isa() {
  CpuIsa isa;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  isa.avx2 = __builtin_cpu_supports("avx2");
  isa.fma = __builtin_cpu_supports("fma");
  isa.avx512f = __builtin_cpu_supports("avx512f");
  isa.avx512bf16 = false;  // gcc 12 cannot query avx512bf16 by name; reported via /proc/cpuinfo
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      isa.avx512bf16 = line.find(" avx512_bf16") != std::string::npos;
      break;
    }
  }
#endif
  return isa;
}

int cpu_cores() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace {
std::uint64_t meminfo_field(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  std::uint64_t kb = 0;
  std::string unit;
  while (in >> name >> kb >> unit) {
    if (name == key) return kb * 1024;
  }
  return 0;
}
std::uint64_t status_field(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      std::istringstream s(line.substr(std::string(key).size()));
      std::uint64_t kb = 0;
      s >> kb;
      return kb * 1024;
    }
  }
  return 0;
}
}  // namespace

std::uint64_t mem_available_bytes() { return meminfo_field("MemAvailable:"); }
std::uint64_t mem_total_bytes() { return meminfo_field("MemTotal:"); }
std::uint64_t current_rss_bytes() { return status_field("VmRSS:"); }

void release_free_heap_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}
std::uint64_t peak_rss_bytes() { return status_field("VmHWM:"); }

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

std::uint64_t memlock_limit_bytes() {
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return 0;
  return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<std::uint64_t>(rl.rlim_cur);
}

std::uint64_t shm_size_bytes() {
  struct statvfs s{};
  if (statvfs("/dev/shm", &s) != 0) return 0;
  return static_cast<std::uint64_t>(s.f_blocks) * s.f_frsize;
}

std::string compiler_version() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "unknown";
#endif
}

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace ds
