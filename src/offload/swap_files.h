// Where one rank's optimizer-state swap files live, and their lifetime on disk:
//
//   <nvme_path>/zero_stage_<S>/optimizer/rank<R>/sub_group_<k>.<state>.tensor.swp
//   <nvme_path>/zero_stage_3/<dtype>params/rank<R>/<parameter name>.tensor.swp   (offload_param)
//
// one file per (sub-group k, float state), e.g. sub_group_0.fp32.tensor.swp,
// sub_group_0.exp_avg.tensor.swp; each holds the state's numel fp32 values, raw little-endian,
// so its size is numel·4 bytes. The folder matches DeepSpeed's
// (<nvme_path>/zero_stage_3/optimizer/rank<global_rank>/); file names differ (DeepSpeed keys them
// by parameter ids). The folder is emptied at start (stale files of a crashed run are never read)
// and removed at normal destruction. Plain C++ (no LibTorch).
#pragma once

#include <cstdint>
#include <string>

namespace ds::offload {

class SwapDirectory {
 public:
  // Validates nvme_path (exists, directory, writable: ConfigError naming `key`), locks the rank
  // folder (ConfigError when another engine or process holds it: two owners would overwrite each
  // other's swap files), then creates it, deleting whatever a previous run left in it. `kind` is the
  // folder between the stage and the rank: "optimizer", or "<dtype>params" for parameters.
  SwapDirectory(const std::string& nvme_path, int zero_stage, int rank, const std::string& key,
                const std::string& kind = "optimizer");
  ~SwapDirectory();  // removes the rank folder, and its parents if they are left empty
  SwapDirectory(const SwapDirectory&) = delete;
  SwapDirectory& operator=(const SwapDirectory&) = delete;

  const std::string& path() const { return path_; }
  std::string file(int64_t sub_group, const std::string& state) const;
  std::string file(const std::string& name) const { return path_ + "/" + name + ".tensor.swp"; }

 private:
  int lock_fd_ = -1;  // flock on <root>/<kind>/rank<R>.lock: one owner per rank folder
  std::string root_;  // <nvme_path>/zero_stage_<S>
  std::string path_;  // <root>/optimizer/rank<R>
};

}  // namespace ds::offload
