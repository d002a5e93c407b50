// Where ds-train starts: from the beginning, from --load DIR, or (--resume, for elastic restarts)
// from the --save directory's latest checkpoint when it has one (docs/elasticity.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "train_checks.h"
#include "train_options.h"
#include "util/error.h"

namespace ds::tools {

// Loads the checkpoint to resume from, if any, and returns the step to start at; std::nullopt when
// --resume finds it at --steps already (a restart after the job finished: nothing left, exit 0).
template <class Engine>
std::optional<int64_t> resume_training(Engine& engine, const TrainOptions& opt) {
  std::string dir = opt.load_dir;
  std::error_code ec;
  if (dir.empty() && opt.resume && !opt.save_dir.empty() &&
      std::filesystem::exists(std::filesystem::path(opt.save_dir) / "latest", ec))
    dir = opt.save_dir;
  if (dir.empty()) return 0;
  auto loaded = engine.load_checkpoint(dir);
  DS_CHECK(loaded.has_value(), IoError, "--load " + dir + ": no 'latest' file there (nothing to resume)");
  const int64_t step = engine.global_steps();
  if (engine.rank() == 0) std::printf("resumed from %s at global step %lld\n", loaded->path.c_str(), static_cast<long long>(step));
  if (opt.resume && step >= opt.steps) {
    if (engine.rank() == 0) std::printf("already at step %lld of --steps %lld: nothing left to train\n",
                                        static_cast<long long>(step), static_cast<long long>(opt.steps));
    return std::nullopt;
  }
  check_resume_step(step, opt.steps, dir);
  return step;
}

}  // namespace ds::tools
