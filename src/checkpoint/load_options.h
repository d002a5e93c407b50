// What engine.load_checkpoint takes and returns, without the checkpoint machinery.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ds {

// load_checkpoint's switches (DeepSpeed's keyword arguments of the same names).
struct LoadOptions {
  bool load_optimizer_states = true;     // false: weights only; optimizer state starts fresh
  bool load_lr_scheduler_states = true;  // false: the schedule starts where the config says
  bool load_module_only = false;         // true: weights only, counters and scaler untouched too
  bool load_module_strict = true;        // false: checkpoint parameters the model lacks are ignored
};

struct LoadResult {
  std::string path;  // the tag directory read
  nlohmann::json client_state;
};

}  // namespace ds
