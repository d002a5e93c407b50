#include "runtime/engine_builder.h"

#include <fmt/format.h>

#include <algorithm>

#include "comm/comm.h"
#include "comm/comms_logger.h"
#include "config/support.h"
#include "offload/huge_pages.h"
#include "parallel/pipe_module.h"
#include "parallel/ulysses.h"
#include "parallel/vocab_parallel.h"
#include "runtime/dtype_policy.h"
#include "runtime/host_setup.h"
#include "runtime/memory_budget.h"
#include "runtime/output_paths.h"
#include "runtime/trainable_params.h"
#include "runtime/world.h"
#include "util/error.h"
#include "util/logging.h"
#include "zero/collectives.h"
#include "zero/optimizer_factory.h"

namespace ds {
namespace {

void build_states(EngineParts& p, torch::nn::Module& module, const EngineOptions& o) {
  const Config& c = *p.config;
  check_memory_budget(module, {&c, p.dtypes, p.data_parallel().size(), p.device});  // before anything is cast
  place_module(module, p.device, p.dtypes.compute);  // PrecisionBuffers keeps the model-dtype storage
  const auto named = collect_trainable_params(module, o.param_groups, *p.ledger);
  zero::ModelStatesOptions options;
  options.config = p.config.get();
  options.zero = p.zero;
  options.plan = p.dtypes;
  options.comm = &p.data_parallel();
  options.ledger = p.ledger.get();
  options.module = &module;
  options.layers = o.layers;
  options.node = p.topology->rank() / ranks_per_node();
  options.offload_gradients = p.zero.gradients == zero::Placement::Cpu;
  if (options.offload_gradients) {
    int64_t numel = 0;
    for (const auto& np : named) numel += np.param.numel();
    p.host = offload::plan_offload_host_memory(c.zero_optimization.offload_optimizer, numel, p.data_parallel().size(),
                                               !p.device.is_cpu());
    options.host = p.host;
    if (p.zero.overlap_step) options.sub_group_steps = p.zero.overlap_sub_group_size;
  }
  if (p.zero.params != zero::Placement::Device)
    offload::note_offload_param_pin_memory(c.zero_optimization.offload_param, !p.device.is_cpu());
  p.states = zero::make_model_states(options, named);  // broadcasts rank 0's parameters
  torch::NoGradGuard no_grad;
  for (auto& b : module.buffers(true)) {
    p.ledger->add(Tier::Device, MemKind::Buffers, b.numel() * b.element_size());
    if (b.is_contiguous()) zero::broadcast_from_rank0(p.data_parallel(), b, "broadcast_buffers");  // views follow
  }
}

// Ulysses runs inside the model's attention: the engine only hands it the sequence group.
void enable_ulysses(torch::nn::Module& module, comm::Communicator& sp) {
  auto* model = dynamic_cast<parallel::SequenceParallelModel*>(&module);
  if (model == nullptr)
    throw ConfigError("sequence_parallel_size",
                      fmt::format("{} needs a model whose attention can run as DistributedAttention (a "
                                  "ds::models::CausalLM family: GPT-2, the Llama family, OPT); this module is not one; set "
                                  "sequence_parallel_size to 1",
                                  sp.size()));
  model->enable_sequence_parallel(sp);
  log::info("Ulysses sequence parallelism over {} ranks: each holds 1/{} of every sequence", sp.size(), sp.size());
}

// tensor_parallel.vocab_parallel: the model's embedding (and tied head) split by rows, recorded with
// AutoTP's cuts so the gradient norm, checkpoints and exports treat it as a slice.
void enable_vocab_parallel(torch::nn::Module& module, comm::Communicator& tp, parallel::AutoTpResult& cuts) {
  if (dynamic_cast<parallel::PipelineModule*>(&module) != nullptr)
    throw ConfigError("tensor_parallel.vocab_parallel",
                      "with pipeline stages the tied embedding lives on the first and the last stage; the "
                      "vocab-parallel split is not supported there yet; set it to false");
  auto* model = dynamic_cast<parallel::VocabParallelModel*>(&module);
  if (model == nullptr)
    throw ConfigError("tensor_parallel.vocab_parallel",
                      "needs a ds::models::CausalLM with a tied LM head (GPT-2); this module is not one; set it to false");
  const auto cut = model->enable_vocab_parallel(tp);
  cuts.add_row_ranges(cut.parameter, cut.rows);
  log::info("vocab-parallel: {} rows of {} split over {} ranks", cut.rows, cut.parameter, tp.size());
}

// Pipeline parallelism runs through PipelineEngine, over one stage of the model; with ZeRO-1 at most
// across the data-parallel group, as DeepSpeed supports it.
void check_pipeline_stage(const Config& c, const EngineOptions& o) {
  const int stages = c.parallel_sizes.pipeline_stages;
  if (!o.pipeline_stage)
    throw ConfigError("pipeline.stages",
                      fmt::format("{} stages need the model cut into stages: build a ds::parallel::PipelineModule from "
                                  "its LayerList and train it with ds::initialize_pipeline (DeepSpeed: "
                                  "deepspeed.initialize(model=PipelineModule(...))); or remove the key",
                                  stages));
  if (c.zero_optimization.stage >= 2)
    throw ConfigError("zero_optimization.stage",
                      fmt::format("ZeRO stage {} with pipeline.stages {}: stages 2 and 3 partition gradients as "
                                  "backward runs, which the pipeline's interleaved micro-batches and tied gradients "
                                  "do not allow (DeepSpeed refuses it too); use stage 0 or 1",
                                  c.zero_optimization.stage, stages));
  if (c.zero_overlap_param_gather)
    throw ConfigError("zero_overlap_param_gather",
                      fmt::format("true with pipeline.stages {}: the overlapped parameter gather is built for one "
                                  "model per rank (stages 1-2 without pipelines), not yet for pipeline stages; set "
                                  "it false",
                                  stages));
}

void build_schedule(EngineParts& p) {
  const Config& c = *p.config;
  if (!c.scheduler) return;
  if (!p.optimizer) throw ConfigError("scheduler", "an LR schedule needs an optimizer; add an \"optimizer\" section");
  std::vector<optim::GroupLr> base;
  const auto lrs = p.optimizer->lrs();
  const auto betas = p.optimizer->betas();
  for (size_t g = 0; g < lrs.size(); ++g) base.push_back({lrs[g], betas[g]});
  p.scheduler = optim::LrScheduler::create(*c.scheduler, std::move(base), optim::has_betas(c.optimizer->type));
}

}  // namespace

EngineParts build_engine_parts(torch::nn::Module& module, Config config, const EngineOptions& o) {
  EngineParts p;
  p.config = std::make_shared<const Config>(std::move(config));
  const Config& c = *p.config;
  // DeepSpeed's comms_logger (its engine's dist.configure): process-wide, set by each engine built,
  // before its first collective.
  comm::CommsLogger::global().configure(c.comms_logger);
  std::shared_ptr<comm::Communicator> world = o.comm;
  if (!world && !o.topology) world = comm::make_communicator(comm::Backend::Auto);
  const ParallelSizes& n = c.parallel_sizes;  // the pipeline's size is 1 (config/ refuses more for now)
  p.topology = o.topology ? o.topology
                          : std::make_shared<parallel::Topology>(
                                world, parallel::TopologySizes{n.pipeline_stages, n.autotp_size, n.sequence_parallel_size});
  log::set_rank(p.topology->rank());
  parallel::check_batch_world(c.world_size, p.topology->world_size());
  check_output_paths(c, p.topology->world());  // monitor folders, profiler file: writable, or fail now
  check_engine_support(c);  // what this build cannot run (the loader refused it already; configs built in code meet it here)
  if (p.topology->pipe().size() > 1) check_pipeline_stage(c, o);
  p.zero = zero::resolve_zero_plan(c);
  p.device = pick_device();
  if (p.device.is_cpu()) {
    configure_cpu_threads();
    if (auto line = offload::enable_huge_pages_for_cpu_tensors(); !line.empty()) log::info("{}", line);
  }
  p.dtypes = resolve_dtype_plan(c, p.device);
  p.ledger = std::make_unique<MemoryLedger>();
  // Before AutoTP cuts and ZeRO-3 partitions the parameters: the profile reports their full sizes.
  if (c.autotuning.enabled)
    p.autotuning = std::make_unique<AutotuningProbe>(c, *p.topology, module, o.layers != nullptr);
  if (p.topology->model().size() > 1) {  // AutoTP: cut the projections before any state is sized from them
    p.tensor_parallel = parallel::apply_auto_tp(module, p.topology->model(), parallel::TpPolicy::builtin(),
                                                c.parallel_sizes.tp_overlap_comm);
    if (c.parallel_sizes.vocab_parallel) enable_vocab_parallel(module, p.topology->model(), *p.tensor_parallel);
    log::info("AutoTP over {} ranks: {}", p.topology->model().size(), p.tensor_parallel->summary());
  }
  if (p.topology->sequence().size() > 1) {  // a pipeline stage's attention is its model's
    auto* stage = dynamic_cast<parallel::PipelineModule*>(&module);
    enable_ulysses(stage != nullptr ? stage->model() : module, p.topology->sequence());
  }
  build_states(p, module, o);
  zero::OptimizerInput opt{&c, p.zero, p.states.get(), {}, p.host.pinned, p.topology->rank(), &p.data_parallel(), {}};
  for (const auto& g : o.param_groups) opt.overrides.push_back({g.lr, g.weight_decay, g.exp_avg_mask});
  if (const auto* stage = dynamic_cast<const parallel::PipelineModule*>(&module))  // copies on other stages
    for (const auto& t : stage->tied())
      if (t.group) opt.kept_apart.push_back(t.name);
  p.optimizer = zero::make_flat_optimizer(opt, *p.ledger);
  build_schedule(p);
  p.scaler = precision::make_loss_scaler(c, p.zero.partitioned());
  p.guard = std::make_unique<precision::StepGuard>(c.fp16, c.nan_guard);
  // The flops profile: world rank 0's, or with pipeline stages one per stage (world rank 0's pipe group).
  StepTelemetry::ProfilePlace place{p.topology->rank() == 0};
  if (p.topology->pipe().size() > 1) {
    const auto& pipe_ranks = p.topology->ranks(parallel::Group::Pipe);
    place = {std::find(pipe_ranks.begin(), pipe_ranks.end(), 0) != pipe_ranks.end(), p.topology->pipe().rank(),
             p.topology->pipe().size()};
  }
  p.telemetry = std::make_unique<StepTelemetry>(c, p.topology->rank(), p.topology->world_size(), module, p.device,
                                                p.states.get(), p.optimizer.get(), place, p.ledger.get());
  // Activation checkpointing wraps the LayerList's walk (docs/activation_checkpointing.md); it
  // composes with stage 3's hooks, which gather a segment's parameters before its recompute.
  if (nn::activation_checkpointing_requested(c)) {
    if (o.layers != nullptr)
      p.activation_checkpointing = nn::apply_activation_checkpointing(*o.layers, module, c.activation_checkpointing);
    else
      log::warn("activation_checkpointing: the model exposes no LayerList (layers()), so the section has no effect");
  }
  if (c.curriculum_learning.enabled) p.curriculum = std::make_unique<CurriculumScheduler>(c.curriculum_learning);
  if (c.progressive_layer_drop.enabled) {
    p.layer_drop = std::make_unique<ProgressiveLayerDrop>(c.progressive_layer_drop);
    const int blocks = o.layers != nullptr ? p.layer_drop->wrap_blocks(*o.layers) : 0;
    if (blocks == 0)
      log::warn("progressive_layer_drop: the model's LayerList marks no residual blocks (nn::Layer::block), so the "
                "engine drops none; the model can read engine.get_pld_theta() as DeepSpeed's models read pld_theta");
    else
      log::info("progressive_layer_drop: {} residual block{} of this {} may be skipped in training forwards (theta {}, "
                "gamma {})",
                blocks, blocks == 1 ? "" : "s", o.pipeline_stage ? "stage" : "model", c.progressive_layer_drop.theta,
                c.progressive_layer_drop.gamma);
  }
  return p;
}

}  // namespace ds
