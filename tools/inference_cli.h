// The inference engine's options, as ds-generate and ds-serve both take them (docs/inference.md).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "cli_checks.h"
#include "comm/comm.h"
#include "inference/engine.h"
#include "util/error.h"

namespace ds::tools {

// --kv-block-size, --num-kv-blocks, --kv-cache-mib, --max-ragged-batch-size,
// --max-ragged-sequence-count, --no-split-prompts, --prefix-caching, --bf16. `no_split` and `bf16`
// are read after parsing (the caller sets eo.scheduler.split_prompts and the dtype from them).
inline void add_inference_engine_options(CLI::App& app, inference::EngineOptions& eo, bool& no_split, bool& bf16) {
  app.add_option("--kv-block-size", eo.kv_block_size, "tokens per KV block")->capture_default_str()
      ->check(whole_number(1, 1 << 16));
  app.add_option("--num-kv-blocks", eo.num_kv_blocks, "KV blocks (0: from --kv-cache-mib)")->capture_default_str()
      ->check(whole_number(0, 1 << 30));
  app.add_option("--kv-cache-mib", eo.kv_cache_mib, "KV cache size when --num-kv-blocks is 0")->capture_default_str()
      ->check(whole_number(1, 1 << 30));
  app.add_option("--max-ragged-batch-size", eo.scheduler.max_ragged_batch_size, "tokens per forward")
      ->capture_default_str()->check(whole_number(1, 1 << 24));
  app.add_option("--max-ragged-sequence-count", eo.scheduler.max_ragged_sequence_count, "sequences per forward")
      ->capture_default_str()->check(whole_number(1, 1 << 24));
  app.add_flag("--no-split-prompts", no_split, "run each prompt whole instead of Dynamic SplitFuse chunks");
  app.add_flag("--prefix-caching", eo.scheduler.prefix_caching, "share full prompt blocks between requests");
  app.add_flag("--bf16", bf16, "bf16 weights and KV cache (default fp32)");
}

// --tensor-parallel N: the model cut over the N ranks of `mpirun -np N` (docs/inference.md).
inline void add_tensor_parallel_option(CLI::App& app, int64_t& tensor_parallel) {
  app.add_option("--tensor-parallel", tensor_parallel, "cut the model over this many ranks (run under mpirun -np N)")
      ->capture_default_str()->check(whole_number(1, 4096));
}

// The world communicator for --tensor-parallel (nullptr for one process): it must be exactly the
// launcher's world, so a mismatch is an error before any model is loaded.
inline std::unique_ptr<comm::Communicator> tensor_parallel_world(int64_t tensor_parallel, const std::string& tool) {
  const int world = comm::launcher_world_size();
  if (tensor_parallel == 1 && world == 1) return nullptr;
  if (world != tensor_parallel)
    throw ConfigError("--tensor-parallel", tool + " runs one process per tensor-parallel rank: --tensor-parallel " +
                                               std::to_string(tensor_parallel) + " needs mpirun -np " +
                                               std::to_string(tensor_parallel) + ", but the launcher started " +
                                               std::to_string(world));
  return comm::make_communicator();
}

}  // namespace ds::tools
