// ds-train: trains the built-in GPT-2 family on a text or token file through ds::initialize —
// the README's main job and the smallest complete example of the public API. With --model-dir it
// fine-tunes a Hugging Face folder on JSON lines instead (train_sft.cpp).
#include <deepspeed/deepspeed.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <type_traits>

#include "models/causal_lm.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "offload/huge_pages.h"
#include "train_checks.h"
#include "train_options.h"
#include "train_resume.h"
#include "train_sft.h"
#include "util/error.h"
#include "util/logging.h"
#include "util/progress.h"
#include "util/stop_signal.h"
#include "util/system_info.h"
#include "util/blas_core_select.h"

namespace {

// The end of a run stopped by SIGTERM/SIGINT (or engine.request_stop()) at `step`: one line saying
// where the work is. With a checkpoint the run ended as asked (exit 0); without --save nothing was
// kept, and the exit code is the shell's for that signal (128 + signal).
int stop(const ds::Engine& engine, int64_t step, const std::string& saved) {
  const int sig = engine.stop_signal();
  const char* why = ds::stop_signal_name(sig);
  if (engine.rank() == 0) {
    if (!saved.empty())
      std::printf("stopped by %s at step %lld; saved %s\n", why, static_cast<long long>(step), saved.c_str());
    else
      std::printf("stopped by %s at step %lld; nothing saved (no --save DIR given)\n", why, static_cast<long long>(step));
    std::fflush(stdout);
  }
  if (!saved.empty()) return 0;
  return sig != 0 ? 128 + sig : 1;
}

struct Run {
  const ds::tools::TrainOptions& opt;
  ds::models::GPT2Config model_cfg;
  int64_t seq = 0;
  const ds::models::TokenDataset& data;
  ds::models::BatchSampler& sampler;
  std::string tip = {};  // printed by rank 0 before training (ds::tools::bf16_suggestion)
};

// One optimizer step of `gas` micro-batches: the plain engine's forward/backward/step, or the
// pipeline's train_batch (the first stage reads the inputs, the last the targets). Returns the loss
// over the whole global batch (each rank's mean over its micro-batches, averaged over the
// data-parallel ranks), which does not depend on how the batch is split: the same at any world size.
template <class E>
double train_step(E& engine, ds::models::BatchSampler& sampler, int64_t step, int64_t micro, int64_t gas, int dp,
                  int dp_rank) {
  // Global sample order: micro-batch m of step `step` on data-parallel rank r, so any world size
  // sees the same samples per global batch as one process would.
  // curriculum_learning (seqlen): the step trains on the first curriculum_seqlen tokens of each window.
  const std::optional<int64_t> seqlen = engine.curriculum_seqlen();
  auto batch_at = [&](int64_t m) {
    ds::models::Batch b = sampler.batch(((step * gas + m) * dp + dp_rank) * micro, micro);
    if (seqlen) b = {ds::truncate_to_seqlen(b.inputs, *seqlen), ds::truncate_to_seqlen(b.targets, *seqlen)};
    return b;
  };
  if constexpr (std::is_same_v<E, ds::PipelineEngine>) {
    int64_t m = 0;
    return engine.train_batch([&] {  // averaged over the replicas already
      auto b = batch_at(m++);
      return ds::PipeBatch{b.inputs, b.targets};
    });
  } else {
    for (int64_t m = 0; m < gas; ++m) {
      auto batch = batch_at(m);
      engine.backward(engine.forward(batch.inputs, batch.targets));
      engine.step();
    }
    double loss = engine.last_loss();
    if (dp > 1) {
      engine.topology().data().all_reduce(ds::comm::Buffer(&loss, 1), ds::comm::ReduceOp::Sum, "ds_train_loss");
      loss /= dp;
    }
    return loss;
  }
}

template <class E>
int train(E& engine, Run& r) {
  ds::tools::TrainOptions opt = r.opt;
  const int64_t micro = engine.train_micro_batch_size_per_gpu();
  const int64_t gas = engine.gradient_accumulation_steps();
  const int rank = engine.rank();
  // Batches go by data-parallel rank: the ranks of a tensor- or sequence-parallel group and of a
  // pipeline share one.
  const int dp = engine.topology().data().size(), dp_rank = engine.topology().data().rank();
  if (rank != 0) opt.progress = ds::ProgressMode::Off;  // rank 0 speaks for the job
  if (rank == 0) std::printf("model: %s\ndata: %s\nbatch: %lld sequences x %lld tokens (micro %lld x GAS %lld)\n",
              r.model_cfg.describe().c_str(), r.data.describe().c_str(),
              static_cast<long long>(engine.train_batch_size()), static_cast<long long>(r.seq),
              static_cast<long long>(micro), static_cast<long long>(gas));
  if (rank == 0) std::printf("%s%s", engine.memory_report().c_str(), r.tip.c_str());
  std::fflush(stdout);

  // The model's shape travels in the checkpoint, so ds-zero-to-fp32 can write a Hugging Face config.
  const auto& mc = r.model_cfg;
  const nlohmann::json client_state = {
      {"model", {{"type", "gpt2"}, {"vocab_size", mc.vocab_size}, {"n_positions", mc.n_positions},
                 {"n_embd", mc.n_embd}, {"n_layer", mc.n_layer}, {"n_head", mc.n_head}}},
      {"seed", opt.seed}};
  const std::optional<int64_t> resumed = ds::tools::resume_training(engine, opt);
  if (!resumed) return 0;
  const int64_t first_step = *resumed;
  auto save = [&] {
    const std::string where = engine.save_checkpoint(opt.save_dir, "", client_state);
    if (rank == 0) std::printf("saved %s\n", where.c_str());
    std::fflush(stdout);
  };

  ds::ProgressReporter progress({opt.steps, opt.progress, std::max<int64_t>(1, opt.steps / 20), stdout});
  if (rank == 0 && engine.curriculum_scheduler() && !engine.curriculum_seqlen())
    std::printf("note: curriculum_learning.curriculum_type is \"%s\"; ds-train only follows \"seqlen\"\n",
                engine.config().curriculum_learning.curriculum_type.c_str());
  double first_loss = 0.0, last_loss = 0.0, tokens_per_s = 0.0, tokens = 0.0;
  auto t_start = std::chrono::steady_clock::now();
  for (int64_t step = first_step; step < opt.steps; ++step) {
    const double tokens_per_step =
        double(engine.train_batch_size() * std::min(r.seq, engine.curriculum_seqlen().value_or(r.seq)));
    tokens += tokens_per_step;
    auto t0 = std::chrono::steady_clock::now();
    const double loss = train_step(engine, r.sampler, step, micro, gas, dp, dp_rank);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double rate = tokens_per_step / std::max(dt, 1e-9);
    tokens_per_s = step == 0 ? rate : 0.9 * tokens_per_s + 0.1 * rate;
    if (step == first_step) first_loss = loss;
    last_loss = loss;
    auto lr = engine.get_lr();
    progress.update({step + 1, loss, lr.empty() ? 0.0 : lr[0], tokens_per_s, ds::current_rss_bytes()});
    if (engine.stop_requested()) {  // agreed by every rank at this boundary
      progress.finish();
      return stop(engine, step + 1, opt.save_dir.empty() ? std::string() : engine.save_checkpoint(opt.save_dir, "", client_state));
    }
    if (!opt.save_dir.empty() && opt.save_interval > 0 && (step + 1) % opt.save_interval == 0 && step + 1 < opt.steps) save();
  }
  progress.finish();
  if (!opt.save_dir.empty() && engine.global_steps() > first_step) save();
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (rank == 0) std::printf("done: %lld steps in %s, loss %.4f -> %.4f, %.0f tokens/s, peak RSS %s\n",
              static_cast<long long>(opt.steps - first_step), ds::format_duration(total).c_str(), first_loss,
              last_loss, tokens / total,
              ds::format_bytes(ds::peak_rss_bytes()).c_str());
  std::fflush(stdout);
  // As a DeepSpeed script's log_summary(); on several ranks with the wait for the slowest one.
  if (engine.config().comms_logger.enabled) engine.log_comms_summary(/*show_straggler=*/engine.world_size() > 1);
  return 0;
}

int run(int argc, char** argv) {
  ds::tools::TrainOptions opt;
  if (!ds::tools::parse_train_options(argc, argv, opt)) return 0;
  if (!opt.model_dir.empty()) return ds::tools::run_sft(opt);  // fine-tuning a Hugging Face folder

  // Everything that can be checked from the options, the config and the data file is checked
  // before anything large is read or built (issue 22): shape, RAM for the model and one
  // micro-batch, the --save folder.
  auto model_cfg = ds::tools::resolve_model(opt);
  const int64_t seq = opt.seq ? opt.seq : model_cfg.n_positions;
  ds::Config config = ds::tools::load_train_config(opt, ds::comm::launcher_world_size());
  const bool pipeline = config.parallel_sizes.pipeline_stages > 1;
  ds::tools::check_memory_budget(model_cfg, config, seq);
  ds::tools::check_save_dir(opt.save_dir);
  auto data = ds::models::TokenDataset::from_file(opt.data_path);
  DS_CHECK(data.vocab_size() <= model_cfg.vocab_size, ds::Error,
           fmt::format("--data {} has tokens up to {} but the model's vocab_size is {}; use --vocab",
                       opt.data_path, data.vocab_size() - 1, model_cfg.vocab_size));
  ds::models::BatchSampler sampler(data, seq, opt.seed);  // checks the data holds one sequence

  // SIGTERM/SIGINT: stop at the next step boundary with a checkpoint (a second one exits at once).
  ds::install_stop_signal_handlers();
  torch::manual_seed(opt.seed);
  ds::offload::enable_huge_pages_for_cpu_tensors();  // before the model: its weights are large tensors too
  Run r{opt, model_cfg, seq, data, sampler, ds::tools::bf16_suggestion(config, ds::detect_cpu_isa().avx512bf16)};
  if (pipeline) {
    // Each rank builds only its stage's layers (the values the whole model's would have).
    auto built = std::make_shared<std::shared_ptr<ds::models::GPT2Impl>>();
    auto build = [&model_cfg, built](const ds::nn::LayerSelection& selection) {
      *built = std::make_shared<ds::models::GPT2Impl>(model_cfg, selection);
      return ds::parallel::BuiltModel{*built, &(*built)->layers()};
    };
    // The model's own loss: under Ulysses the sequence group's token mean.
    auto loss = [built](const torch::Tensor& logits, const torch::Tensor& targets) { return (*built)->loss(logits, targets); };
    auto engine = ds::initialize_pipeline(build, std::move(config), {"parameters", loss});
    return train(engine, r);
  }
  auto model = ds::models::GPT2(model_cfg);
  auto engine = ds::initialize(model, std::move(config));
  return train(engine, r);
}

}  // namespace

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "ds-train");  // before any BLAS call (docs/cpu-kernels.md)
  try {
    return run(argc, argv);
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds-train: error: %s\n", e.what());
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "ds-train: error (LibTorch): %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds-train: error: %s\n", e.what());
  }
  return 1;
}
