// The "activation_checkpointing" section (reference §12). As in DeepSpeed, the engine does not act
// on it by itself; the checkpointing helpers read it.
#pragma once

#include <cstdint>
#include <optional>

namespace ds {

struct ActivationCheckpointingConfig {
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  std::optional<int64_t> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

}  // namespace ds
