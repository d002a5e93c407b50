// ds-train's up-front checks (see train_checks.h).
#include "train_checks.h"

#include <fmt/format.h>

#include "models/gpt2_memory.h"
#include "nn/activation_checkpointing.h"
#include "runtime/dtype_policy.h"
#include "runtime/world.h"
#include "util/error.h"
#include "util/system_info.h"
#include "util/writable_path.h"
#include "zero/memory_estimate.h"

namespace ds::tools {
namespace {

std::string bytes(double b) { return format_bytes(b >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(b)); }

}  // namespace

void check_memory_budget(const models::GPT2Config& shape, const Config& config, int64_t seq) {
  const double avail = double(mem_available_bytes());
  if (avail == 0) return;  // unknown: the engine and the allocator will tell
  const double params = double(shape.num_parameters());
  // The model is built whole in fp32 before ds::initialize shards or offloads it.
  DS_CHECK(params * 4 <= avail, OutOfMemory,
           fmt::format("--model {}: building its {:.0f} parameters in fp32 takes {}, but only {} of RAM is available; "
                       "pick a smaller --model",
                       shape.describe(), params, bytes(params * 4), bytes(avail)));

  // The engine's own estimate of its model states (the check it makes at init, made here before
  // anything is built), and the activations of one micro-batch.
  const zero::DtypePlan plan = resolve_dtype_plan(config, torch::kCPU);
  zero::EstimateInput in;
  in.param_numels = shape.parameter_sizes();
  in.world = config.world_size;
  in.plan = plan;
  in.config = &config;
  const MemoryLedger states = zero::estimate_model_states(in);
  const double states_bytes = double(states.total() - states.tier_total(Tier::Nvme));
  const bool checkpointing = nn::activation_checkpointing_requested(config);
  const int element = static_cast<int>(c10::elementSize(plan.compute));
  const int64_t micro = config.train_micro_batch_size_per_gpu;
  const auto act = models::estimate_activations(
      shape, micro, seq, element,
      checkpointing ? std::optional<int64_t>(config.activation_checkpointing.number_checkpoints.value_or(shape.n_layer))
                    : std::nullopt);
  const double ranks = std::max(1, local_world_size());
  const double need = ranks * (states_bytes + act.total());
  if (need <= avail) return;
  if (ranks * states_bytes > avail) {  // the model itself, whatever the batch
    throw OutOfMemory(fmt::format(
        "--model {}: at ZeRO stage {} each of the {:.0f} rank(s) on this machine needs {} for model states (parameters, "
        "gradients, master weights, optimizer state), {} in all before any activations, but only {} of RAM is "
        "available. Use a smaller model, a higher zero_optimization.stage, offload, or more machines (`ds-estimate` "
        "prints the numbers per stage)",
        shape.describe(), config.zero_optimization.stage, ranks, bytes(states_bytes), bytes(ranks * states_bytes),
        bytes(avail)));
  }
  std::string fix = fmt::format(
      "lower train_micro_batch_size_per_gpu (raise gradient_accumulation_steps to keep the batch of {}) or --seq",
      config.train_batch_size);
  if (!checkpointing) {
    const auto ckpt = models::estimate_activations(shape, micro, seq, element, shape.n_layer);
    fix += fmt::format(", or turn on activation_checkpointing (an \"activation_checkpointing\" section; about {} of "
                       "activations per rank then)",
                       bytes(ckpt.total()));
  }
  throw OutOfMemory(fmt::format(
      "train_micro_batch_size_per_gpu {} x --seq {}: the activations of one micro-batch take about {} per rank ({} per "
      "layer x {} layers{}, {} for the logits), plus {} of model states; the {:.0f} rank(s) on this machine need {} but "
      "only {} of RAM is available. Fix: {}",
      micro, seq, bytes(act.total()), bytes(act.per_layer), shape.n_layer,
      checkpointing ? " with activation checkpointing" : "", bytes(act.logits), bytes(states_bytes), ranks, bytes(need),
      bytes(avail), fix));
}

void check_save_dir(const std::string& dir) {
  if (dir.empty()) return;
  if (std::string why = writable_dir_problem(dir); !why.empty())
    throw IoError("--save " + dir + ": " + why + "; checkpoints could not be written there (nothing was trained)");
}

void check_resume_step(int64_t checkpoint_step, int64_t steps, const std::string& load_dir) {
  DS_CHECK(steps > checkpoint_step, Error,
           fmt::format("--load {}: the checkpoint is at step {}, and --steps {} counts from the start of training, so "
                       "there is nothing left to train; pass --steps greater than {} (--steps {} trains 100 more)",
                       load_dir, checkpoint_step, steps, checkpoint_step, checkpoint_step + 100));
}

std::string bf16_suggestion(const Config& config, bool cpu_bf16) {
  if (!cpu_bf16 || config.bf16.enabled || config.fp16.enabled) return "";
  return "tip: this CPU computes bf16 natively (AVX512-BF16); \"bf16\": {\"enabled\": true} in the config trains "
         "GPT-2 small ~2.4x faster than fp32 here, with fp32 master weights and optimizer state "
         "(docs/mixed_precision.md)\n";
}

}  // namespace ds::tools
