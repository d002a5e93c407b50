// ds-report: what users paste into bug reports (DeepSpeed's ds_report shape), and
// `--config FILE` validation that prints every resolved value with its source.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <torch/version.h>

#ifdef DS_HAVE_MPI
#include <mpi.h>
#endif

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "aio/nvme_path.h"
#include "cli_checks.h"
#include "comm/comm.h"
#include "config/loader.h"
#include "config/report.h"
#include "config/support.h"
#include "config/zero_plan.h"
#include "optim/simd_path.h"
#include "util/error.h"
#include "report_features.h"
#include "report_kernels.h"
#include "runtime/output_paths.h"
#include "util/system_info.h"
#include "util/blas_core_select.h"

namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

std::string mpi_version() {
#ifdef DS_HAVE_MPI
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(buf, &len);  // allowed before MPI_Init
  std::string v(buf, static_cast<size_t>(len));
  auto nl = v.find_first_of(",\n");
  return nl == std::string::npos ? v : v.substr(0, nl);
#else
  return "not found at build time";
#endif
}

// The SIMD path the optimizer kernels run with; a bad DS_SIMD is reported here, not thrown.
std::string optimizer_kernels() {
  try {
    return std::string(ds::optim::to_string(ds::optim::active_simd_path())) + " (DS_SIMD to override)";
  } catch (const ds::Error& e) {
    return std::string("error: ") + e.what();
  }
}

Rows environment_rows() {
  auto isa = ds::detect_cpu_isa();
  auto memlock = ds::memlock_limit_bytes();
  return {
      {"deepspeed.cpp version", DS_VERSION},
      {"git hash", DS_GIT_HASH},
      {"build type", DS_BUILD_TYPE},
      {"compiler", ds::compiler_version()},
      {"libtorch version", TORCH_VERSION},
      {"cuda available", torch::cuda::is_available() ? "yes" : "no"},
      {"mpi library", mpi_version()},
#ifdef DS_LIBURING_VERSION
      {"liburing", std::string(DS_LIBURING_VERSION) + " (headers found at build time)"},
#else
      {"liburing", "not found at build time"},
#endif
      {"cpu isa (best)", isa.best()},
      {"cpu avx2 / fma / avx512f / avx512_bf16", fmt::format("{} / {} / {} / {}", isa.avx2, isa.fma, isa.avx512f,
                                                      isa.avx512bf16)},
      {"optimizer kernels", optimizer_kernels()},
      {"cpu cores", std::to_string(ds::cpu_cores())},
      {"memory available", ds::format_bytes(ds::mem_available_bytes())},
      {"locked-memory limit (ulimit -l)", memlock == UINT64_MAX ? "unlimited" : ds::format_bytes(memlock)},
      {"shared memory (/dev/shm)", ds::format_bytes(ds::shm_size_bytes())},
      {"intra-op threads", std::to_string(torch::get_num_threads())},
  };
}

// The environment rows, then the compute kernels' (BLAS core, oneDNN ISA, measured GEMM rates).
Rows all_rows() {
  Rows rows = environment_rows();
  for (auto& row : ds::tools::kernel_rows()) rows.push_back(std::move(row));
  return rows;
}

std::string dots(const std::string& name, size_t width) {
  return name + " " + std::string(name.size() + 1 < width ? width - name.size() - 1 : 1, '.') + " ";
}

void print_environment(bool json) {
  auto rows = all_rows();
  const auto feats = ds::tools::probe_features();
  if (json) {
    nlohmann::json j;
    for (const auto& [k, v] : rows) j["environment"][k] = v;
    for (const auto& f : feats) j["features"][f.name] = {{"installed", f.installed}, {"note", f.note}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s\ndeepspeed.cpp C++ op report\n%s\n", std::string(50, '-').c_str(), std::string(50, '-').c_str());
  std::printf("NOTE: every op is compiled ahead of time; nothing is JIT-built at run time. Each row was probed\n"
              "just now (a training step, an io_uring ring), not read from a list.\n");
  std::printf("%s installed\n", dots("op name", 34).c_str());
  for (const auto& f : feats)
    std::printf("%s [%s]%s%s\n", dots(f.name, 34).c_str(), f.installed ? "YES" : "NO", f.note.empty() ? "" : "  ",
                f.note.c_str());
  std::printf("%s\ndeepspeed.cpp general environment info:\n", std::string(50, '-').c_str());
  for (const auto& [k, v] : rows) std::printf("%s%s\n", dots(k, 40).c_str(), v.c_str());
}

// The engine's refusals that depend on this machine rather than on the model: the device, the
// monitor and profiler output paths, the NVMe swap folders (existence and writability; free space
// needs the model's size and is checked by the engine).
void check_machine(const ds::Config& cfg) {
  ds::check_device_support(cfg, torch::cuda::is_available());
  const auto one = ds::comm::make_communicator(ds::comm::Backend::Single);
  ds::check_output_paths(cfg, *one);
  const auto plan = ds::zero::resolve_zero_plan(cfg);
  const auto& z = cfg.zero_optimization;
  if (plan.params == ds::zero::Placement::Nvme)
    ds::aio::validate_nvme_path(*z.offload_param.nvme_path, "zero_optimization.offload_param.nvme_path");
  if (plan.optimizer == ds::zero::Placement::Nvme)
    ds::aio::validate_nvme_path(*z.offload_optimizer.nvme_path, "zero_optimization.offload_optimizer.nvme_path");
}

}  // namespace

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "ds-report");  // before any BLAS call (docs/cpu-kernels.md)
  CLI::App app{"ds-report: environment report, or validate a DeepSpeed config with --config"};
  std::string config_path;
  int world_size = 1;
  bool json = false;
  app.add_option("--config", config_path, "validate this DeepSpeed JSON config and print every resolved value");
  app.add_option("--world-size,--world_size", world_size, "world size used to resolve the batch triple")
      ->capture_default_str()->check(ds::tools::whole_number(1, 1 << 20));
  app.add_flag("--json", json, "machine-readable output");
  bool blas_core = false;
  app.add_flag("--blas-core", blas_core, "print the OpenBLAS core this run chose and runs (empty: not OpenBLAS) and exit");
  CLI11_PARSE(app, argc, argv);
  try {
    if (blas_core) {
      std::printf("%s\n", ds::tools::running_blas_core().c_str());
      return 0;
    }
    if (config_path.empty()) {
      print_environment(json);
      return 0;
    }
    auto cfg = ds::load_config_file(config_path, world_size);
    check_machine(cfg);  // what the engine would refuse on this machine, refused here first
    // The plan the engine builder will follow (config/zero_plan.h), after the resolved values.
    const auto plan = ds::zero::resolve_zero_plan(cfg).describe();
    if (json) {
      auto doc = nlohmann::json::parse(ds::render_config_report_json(cfg));
      doc["zero_plan"] = plan;
      std::printf("%s\n", doc.dump(2).c_str());
      return 0;
    }
    std::printf("%s\nZeRO plan:\n", ds::render_config_report(cfg).c_str());
    for (const auto& line : plan) std::printf("  %s\n", line.c_str());
    return 0;
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds-report: error: %s\n", e.what());
    return 1;
  }
}
