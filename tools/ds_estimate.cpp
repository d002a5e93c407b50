// ds-estimate: memory per rank and tier for a model's states at each ZeRO stage and world size,
// before buying or booking hardware — DeepSpeed's estimate_zero{2,3}_model_states_mem_needs, but
// counting the engine's real buffers (padding, 16-bit copies, gradient buckets, persistent
// parameters, offload). The numbers are zero::estimate_model_states, which a multi-rank test holds
// equal to the ledger of real engines.
//
//   ds-estimate --model small --world 1,2,4,8
//   ds-estimate --config examples/configs/zero3.json --model large --world 8
//   ds-estimate --params 7e9 --layers 32 --world 16 --stage 3 --bf16 --offload-optimizer
//   ds-estimate --model medium --tp 2 --world 4,8      # AutoTP: per rank, ZeRO over world / tp
//   ds-estimate --model small --tp 2 --vocab-parallel  # ... with the embedding split too
//   ds-estimate --model medium --sp 2 --world 4,8      # Ulysses: ZeRO over world (data x sequence)
//   ds-estimate --model medium --pp 4 --world 8        # pipeline: the heaviest stage's states
// With tensor parallelism (--tp, or the config's tensor_parallel.autotp_size) each rank holds its
// slices of the cut layers (GPT2Config::parameter_sizes(tp)) and ZeRO partitions over world / tp.
// Ulysses (--sp, or the config's sequence_parallel_size) leaves the states whole and ZeRO partitions
// over data x sequence, as DeepSpeed's sequence-data-parallel group: the same bytes as without it;
// what it divides is activations, which this tool does not count. With pipeline stages (--pp, or the
// config's pipeline.stages) the layers (GPT-2: embed, the blocks, head with its tied copy of wte) are
// partitioned by parameter count as PipelineModule does, and the heaviest stage is reported, with
// ZeRO over world / (pp x tp).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli_checks.h"
#include "config/loader.h"
#include "config/zero_plan.h"
#include "models/gpt2_config.h"
#include "parallel/pipe_partition.h"
#include "runtime/dtype_policy.h"
#include "util/error.h"
#include "util/system_info.h"
#include "zero/memory_estimate.h"
#include "zero/stage3_step_estimate.h"
#include "util/blas_core_select.h"

namespace {

// Parameter sizes of a model described only by its count and depth: L equal blocks and the rest as
// one embedding (the largest tensor, which is what bucket sizes and sharding care about).
std::vector<int64_t> synthetic_sizes(double params, int64_t layers) {
  const int64_t total = static_cast<int64_t>(params);
  const int64_t per_block = layers > 0 ? total / (layers + 1) : 0;
  std::vector<int64_t> sizes{total - per_block * layers};
  for (int64_t i = 0; i < layers; ++i) sizes.push_back(per_block);
  return sizes;
}

// The layers (a pipeline's unit, stage 3's fetch unit) as indices into the tensor sizes: GPT-2's
// embed (wte, wpe), blocks and head (ln_f and the tied wte again), or the synthetic model's items
// one per layer.
std::vector<std::vector<size_t>> layer_params(size_t num_sizes, bool gpt2, int64_t n_layer) {
  std::vector<std::vector<size_t>> layers;
  if (!gpt2) {
    for (size_t i = 0; i < num_sizes; ++i) layers.push_back({i});
    return layers;
  }
  const size_t per_block = (num_sizes - 4) / size_t(n_layer);
  layers.push_back({0, 1});
  for (size_t l = 0; l < size_t(n_layer); ++l) {
    layers.emplace_back();
    for (size_t k = 0; k < per_block; ++k) layers.back().push_back(2 + l * per_block + k);
  }
  layers.push_back({num_sizes - 2, num_sizes - 1, 0});
  return layers;
}

std::vector<std::vector<int64_t>> layer_sizes(const std::vector<int64_t>& sizes, bool gpt2, int64_t n_layer) {
  std::vector<std::vector<int64_t>> layers;
  for (const auto& ids : layer_params(sizes.size(), gpt2, n_layer)) {
    layers.emplace_back();
    for (size_t id : ids) layers.back().push_back(sizes[id]);
  }
  return layers;
}

// The heaviest stage of `stages` over those layers: its tensor sizes and "stage k of N, layers a-b".
std::pair<std::vector<int64_t>, std::string> heaviest_stage(const std::vector<std::vector<int64_t>>& layers, int stages) {
  std::vector<ds::parallel::PartitionItem> items;
  for (size_t i = 0; i < layers.size(); ++i) {
    int64_t n = 0;
    for (int64_t s : layers[i]) n += s;
    items.push_back({std::to_string(i), n});
  }
  const auto parts = ds::parallel::partition_layers("parameters", items, stages);
  int best = 0;
  int64_t best_n = -1;
  for (int k = 0; k < stages; ++k) {
    int64_t n = 0;
    for (int i = parts[size_t(k)]; i < parts[size_t(k) + 1]; ++i) n += items[size_t(i)].num_params;
    if (n > best_n) best = k, best_n = n;
  }
  std::vector<int64_t> sizes;
  for (int i = parts[size_t(best)]; i < parts[size_t(best) + 1]; ++i)
    sizes.insert(sizes.end(), layers[size_t(i)].begin(), layers[size_t(i)].end());
  return {sizes, "pipeline stage " + std::to_string(best) + " of " + std::to_string(stages) + ", layers " +
                     std::to_string(parts[size_t(best)]) + "-" + std::to_string(parts[size_t(best) + 1] - 1)};
}

}  // namespace

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "ds-estimate");  // before any BLAS call (docs/cpu-kernels.md)
  std::string config_path, model = "small";
  double params = 0;
  int64_t layers = 0;
  std::vector<int> worlds{1, 2, 4, 8};
  std::vector<int> stages;
  bool bf16 = false, fp16 = false, offload = false, vocab = false;
  int tp = 0;  // 0: the config's autotp_size (1 without a config)
  int sp = 0;  // 0: the config's sequence_parallel_size (1 without a config)
  int pp = 0;  // 0: the config's pipeline.stages (1 without a config)
  CLI::App app{"ds-estimate: per-rank memory of model states for each ZeRO stage and world size"};
  app.add_option("--config", config_path, "a DeepSpeed JSON config (its stage, dtypes, buckets, offload)");
  app.add_option("--model", model, "GPT-2 preset: tiny, small, medium, large, xl")->capture_default_str();
  app.add_option("--params", params, "instead of --model: a parameter count (e.g. 7e9)")
      ->check(ds::tools::real_number(1, 1e15));
  app.add_option("--layers", layers, "with --params: number of equal blocks")
      ->check(ds::tools::whole_number(0, 1 << 20));
  app.add_option("--world", worlds, "world sizes")->delimiter(',')->capture_default_str()
      ->check(ds::tools::whole_number(1, 1 << 20));
  app.add_option("--stage", stages, "ZeRO stages (default: 0,1,2,3, or the config's)")->delimiter(',')
      ->check(ds::tools::whole_number(0, 3));
  app.add_option("--tp", tp, "AutoTP size (default: the config's tensor_parallel.autotp_size, else 1)")
      ->check(ds::tools::whole_number(1, 1 << 20));
  app.add_flag("--vocab-parallel", vocab,
               "with --tp: the embedding and tied LM head split over the group too (tensor_parallel.vocab_parallel)");
  app.add_option("--sp", sp, "Ulysses sequence_parallel_size (default: the config's, else 1)")
      ->check(ds::tools::whole_number(1, 1 << 20));
  app.add_option("--pp", pp, "pipeline stages (default: the config's pipeline.stages, else 1): the heaviest stage")
      ->check(ds::tools::whole_number(1, 1 << 20));
  app.add_flag("--bf16", bf16, "bf16 parameters (without --config)");
  app.add_flag("--fp16", fp16, "fp16 parameters (without --config)");
  app.add_flag("--offload-optimizer", offload, "offload_optimizer device cpu (without --config)");
  CLI11_PARSE(app, argc, argv);

  try {
    if (tp > 0 && !config_path.empty())
      throw ds::ConfigError("tensor_parallel.autotp_size", "--tp with --config: set the size in the config instead");
    if (vocab && !config_path.empty())
      throw ds::ConfigError("tensor_parallel.vocab_parallel", "--vocab-parallel with --config: set it in the config instead");
    if (sp > 0 && !config_path.empty())
      throw ds::ConfigError("sequence_parallel_size", "--sp with --config: set the size in the config instead");
    if (pp > 0 && !config_path.empty())
      throw ds::ConfigError("pipeline.stages", "--pp with --config: set the stages in the config instead");
    // One rank's parameter sizes at tensor-parallel size t, the vocabulary split over it or not (the
    // most any rank of the group holds).
    auto sizes_at = [&](int t, bool split_vocab) {
      if (t > 1 && params > 0)
        throw ds::ConfigError("tensor_parallel.autotp_size", "--params describes no layers to cut; use --model");
      return params > 0 ? synthetic_sizes(params, layers) : ds::models::GPT2Config::preset(model).parameter_sizes(t, split_vocab);
    };
    if (tp == 0) tp = 1;
    if (sp == 0) sp = 1;
    if (pp == 0) pp = 1;
    if (params == 0) {  // Ulysses gives each rank whole heads of what TP left it
      const int64_t heads = ds::models::GPT2Config::preset(model).n_head;
      if (heads % tp == 0 && (heads / tp) % sp != 0)
        throw ds::ConfigError("sequence_parallel_size",
                              std::to_string(sp) + " does not divide GPT-2's " + std::to_string(heads / tp) +
                                  " heads per rank (Ulysses gives each rank whole heads)");
    }
    int64_t psi = 0;
    for (int64_t s : sizes_at(tp, vocab)) psi += s;
    std::string base = "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\"}";
    if (bf16) base += ", \"bf16\": {\"enabled\": true}";
    if (fp16) base += ", \"fp16\": {\"enabled\": true}";
    if (stages.empty()) {
      if (!config_path.empty()) stages.push_back(ds::zero::resolve_zero_plan(ds::load_config_file(config_path, 1)).stage);
      else stages = {0, 1, 2, 3};
    }
    std::printf("model states per rank: %.3fB parameters%s%s\n", double(psi) / 1e9,
                tp > 1 ? (" (this rank's slices at tensor-parallel size " + std::to_string(tp) + ")").c_str() : "",
                config_path.empty() ? "" : (" with " + config_path).c_str());
    std::printf("%6s %6s %14s %14s %14s %14s   %s\n", "stage", "world", "device", "cpu", "nvme", "total", "device by kind");
    for (int stage : stages)
      for (int world : worlds) {
        if (world % (tp * sp * pp) != 0) {
          std::printf("%6d %6d   (skipped: not divisible by the pipeline x tensor x sequence-parallel size %d)\n",
                      stage, world, tp * sp * pp);
          continue;
        }
        ds::Config cfg;
        if (!config_path.empty()) {
          cfg = ds::load_config_file(config_path, world);
          cfg.zero_optimization.stage = stage;
        } else {
          std::string text = base + ", \"zero_optimization\": {\"stage\": " + std::to_string(stage);
          if (offload && stage > 0) text += ", \"offload_optimizer\": {\"device\": \"cpu\"}";
          text += "}, \"tensor_parallel\": {\"autotp_size\": " + std::to_string(tp) +
                  (vocab ? ", \"vocab_parallel\": true}" : "}");
          text += ", \"sequence_parallel_size\": " + std::to_string(sp);
          text += ", \"pipeline\": {\"stages\": " + std::to_string(pp) + "}";
          cfg = ds::load_config_text(text + "}", world, "<ds-estimate>");
        }
        const int stages = cfg.parallel_sizes.pipeline_stages;
        if (stages > 1 && stage >= 2) {
          std::printf("%6d %6d   (skipped: ZeRO stages 2-3 are refused with pipeline stages, as in DeepSpeed)\n", stage,
                      world);
          continue;
        }
        ds::zero::EstimateInput in;
        in.param_numels = sizes_at(cfg.parallel_sizes.autotp_size, cfg.parallel_sizes.vocab_parallel);
        in.plan = ds::resolve_dtype_plan(cfg, torch::kCPU);
        std::string where;
        const int64_t n_layer = params > 0 ? layers : ds::models::GPT2Config::preset(model).n_layer;
        if (stage == 3) {  // what a step gathers on top (stages 0-2 hold the whole model already)
          ds::zero::Stage3StepInput step{in.param_numels, layer_params(in.param_numels.size(), params == 0, n_layer)};
          const int64_t gathered = ds::zero::stage3_peak_gathered_numel(step, cfg.zero_optimization);
          where = "; a step gathers up to " +
                  ds::format_bytes(uint64_t(gathered) * c10::elementSize(in.plan.compute)) +
                  " more";
        }
        if (stages > 1) {
          std::tie(in.param_numels, where) = heaviest_stage(layer_sizes(in.param_numels, params == 0, n_layer), stages);
          where = "   [" + where + "]";  // stages > 1: ZeRO 0-1 only, nothing gathered
        }
        // ZeRO partitions over data x sequence: world / (tp x pp).
        in.world = cfg.data_parallel_size * cfg.parallel_sizes.sequence_parallel_size;
        in.config = &cfg;
        const auto m = ds::zero::estimate_model_states(in);
        using ds::MemKind;
        using ds::Tier;
        std::printf("%6d %6d %14s %14s %14s %14s   params %s, grads %s, master+state %s, buffers %s%s\n", stage, world,
                    ds::format_bytes(m.tier_total(Tier::Device)).c_str(), ds::format_bytes(m.tier_total(Tier::Cpu)).c_str(),
                    ds::format_bytes(m.tier_total(Tier::Nvme)).c_str(), ds::format_bytes(m.total()).c_str(), ds::format_bytes(m.bytes(Tier::Device, MemKind::Params)).c_str(),
                    ds::format_bytes(m.bytes(Tier::Device, MemKind::Grads)).c_str(),
                    ds::format_bytes(m.bytes(Tier::Device, MemKind::Master) + m.bytes(Tier::Device, MemKind::OptimizerState)).c_str(),
                    ds::format_bytes(m.bytes(Tier::Device, MemKind::Buffers)).c_str(), where.c_str());
      }
    std::printf("dtypes as the engine would choose on this machine's CPU; module buffers and activations not included;\n"
                "stage 3's step figure is the most parameter bytes gathered at once under the configured\n"
                "stage3_max_reuse_distance (a prefetch's receive buffer comes on top)\n");
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds-estimate: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
