// The "checkpoint" section (reference §1.3).
#pragma once

#include <string>

namespace ds {

// What save_checkpoint does when ranks disagree on the tag.
enum class TagValidation { Ignore, Warn, Fail };

struct CheckpointParallelWriteConfig {
  bool pipeline_stage = false;
};

struct CheckpointConfig {
  TagValidation tag_validation = TagValidation::Warn;
  bool load_universal = false;
  bool use_node_local_storage = false;
  CheckpointParallelWriteConfig parallel_write;
};

std::string to_string(TagValidation v);  // "Ignore", "Warn", "Fail"

}  // namespace ds
