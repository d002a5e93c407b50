// The probes behind ds-report's op table (see report_features.h).
#include "report_features.h"

#include <deepspeed/deepspeed.h>
#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "aio/uring_backend.h"
#include "models/gpt2.h"
#include "optim/simd_path.h"
#include "util/logging.h"

namespace ds::tools {
namespace {

// One training step of a tiny GPT-2 under `config_json`; "" when it trained, else why not.
std::string train_one_step(const std::string& config_json) {
  try {
    models::GPT2Config shape;
    shape.vocab_size = 16;
    shape.n_positions = 8;
    shape.n_embd = 16;
    shape.n_layer = 2;
    shape.n_head = 2;
    torch::manual_seed(0);
    auto engine = ds::initialize(models::GPT2(shape), nlohmann::json::parse(config_json));
    auto tokens = torch::randint(0, shape.vocab_size, {1, shape.n_positions + 1}, torch::kLong);
    auto loss = engine.forward(tokens.narrow(1, 0, shape.n_positions), tokens.narrow(1, 1, shape.n_positions));
    engine.backward(loss);
    engine.step();
    if (engine.global_steps() != 1 || !std::isfinite(engine.last_loss())) return "the step did not complete";
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string step_config(const std::string& extra) {
  return R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}})" +
         (extra.empty() ? std::string() : ", " + extra) + "}";
}

// Probes each variant; the row is installed when any works, and its note names the ones that did
// and why the others did not.
FeatureRow probe_variants(const std::string& name, const std::vector<std::pair<std::string, std::string>>& variants) {
  FeatureRow row{name, false, ""};
  std::string worked, failed;
  for (const auto& [label, extra] : variants) {
    const std::string why = train_one_step(step_config(extra));
    if (why.empty()) {
      row.installed = true;
      worked += (worked.empty() ? "" : ", ") + label;
    } else {
      failed += (failed.empty() ? "" : "; ") + label + ": " + why;
    }
  }
  row.note = worked.empty() ? failed : worked + " (one step each, just now)" + (failed.empty() ? "" : "; failed: " + failed);
  return row;
}

template <class Enum>
std::string enum_names(Enum last) {
  std::string out;
  for (int i = 0; i <= static_cast<int>(last); ++i) out += (out.empty() ? "" : ", ") + ds::to_string(static_cast<Enum>(i));
  return out;
}

FeatureRow optimizers_row() {
  std::string paths;
  for (auto p : {optim::SimdPath::Scalar, optim::SimdPath::Avx2, optim::SimdPath::Avx512})
    if (p == optim::SimdPath::Scalar || optim::cpu_supports(p)) paths += std::string(paths.empty() ? "" : ", ") + optim::to_string(p);
  return {"optimizers (flat spans)", true, enum_names(OptimizerType::Lion) + "; kernels on this cpu: " + paths};
}

FeatureRow uring_row() {
  if (!aio::uring_compiled_in()) return {"aio (io_uring)", false, "liburing was not found at build time (install liburing-dev and rebuild)"};
  std::string why;
  auto ring = aio::UringBackend::create(aio::AioOptions{}, &why);
  if (ring) return {"aio (io_uring)", true, "a ring was set up just now; O_DIRECT NVMe swapping uses it"};
  return {"aio (io_uring)", false, "the kernel refused a ring: " + why + " (the thread pool is used instead)"};
}

}  // namespace

std::vector<FeatureRow> probe_features() {
  // The probes' own engines would log their setup; the report is the output.
  auto& logger = log::logger();
  const auto level = logger.level();
  logger.set_level(spdlog::level::off);
  std::vector<FeatureRow> rows;
  rows.push_back(probe_variants("engine (stage 0, data parallel)",
                                {{"fp32", ""}, {"bf16", R"("bf16": {"enabled": true})"}, {"fp16", R"("fp16": {"enabled": true})"}}));
  rows.push_back(probe_variants("zero stages 1-3", {{"stage 1", R"("zero_optimization": {"stage": 1})"},
                                                    {"stage 2", R"("zero_optimization": {"stage": 2})"},
                                                    {"stage 3", R"("zero_optimization": {"stage": 3})"}}));
  rows.push_back(probe_variants("zero-offload (optimizer on cpu)",
                                {{"stage 2", R"("zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}})"},
                                 {"stage 3", R"("zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}})"}}));
  logger.set_level(level);
  rows.push_back(optimizers_row());
  rows.push_back({"lr schedules", true, enum_names(SchedulerType::LRRangeTest)});
  rows.push_back({"mpi communicator", true, "ring reductions, MPI all_gather/broadcast (MPI is required at build time)"});
#ifdef DS_WITH_NCCL
  rows.push_back({"nccl communicator", torch::cuda::is_available(), torch::cuda::is_available() ? "compiled in" : "compiled in; no CUDA device"});
#else
  rows.push_back({"nccl communicator", false, "CUDA builds only (cmake -DDS_WITH_CUDA=ON)"});
#endif
  rows.push_back(uring_row());
  rows.push_back({"aio (thread pool)", true, "pread/pwrite fallback where io_uring is refused"});
  return rows;
}

}  // namespace ds::tools
