// Stage 3 parameter storage (reference §5.1): every trainable parameter is sharded on its own —
// ceil(numel / world) elements per rank, the tail padded — and this rank keeps only its shards, in
// the model dtype, concatenated per param group. A module parameter keeps its shape but, while
// released, its data is a single NaN broadcast to that shape (one element of memory; anything that
// reads it un-gathered produces NaN, never plausible numbers). Gathering all-gathers the shards of a
// set of parameters in one collective and gives each parameter its full compute-dtype data again.
// Small parameters (stage3_param_persistence_threshold, model_persistence_threshold) stay gathered.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/communicator.h"
#include "comm/work.h"
#include "config/zero_config.h"
#include "util/memory_ledger.h"
#include "zero/dtype_plan.h"
#include "zero/flat_params.h"
#include "zero/partition.h"

namespace ds::zero {

struct ShardedParam {
  std::string name;
  torch::Tensor param;           // the module's parameter (full while gathered)
  std::vector<int64_t> shape;
  int64_t numel = 0;
  ParamShard shard;
  size_t group = 0;              // optimizer group
  int64_t offset = 0;            // of this rank's shard inside the group's shard storage
  bool persistent = false;
  bool gathered = true;
  int holds = 0;                 // GatheredParameters guards holding it
};

class ShardedParameters {
 public:
  // `params` hold full values (identical on every rank); afterwards each keeps only its shard.
  ShardedParameters(comm::Communicator& comm, const DtypePlan& plan, const ZeroConfig& zero,
                    const std::vector<NamedParam>& params, MemoryLedger& ledger, Tier tier);
  ~ShardedParameters();

  // A started gather of some parameters; finish() makes them usable.
  struct Pending {
    std::vector<size_t> ids;
    std::vector<int64_t> offsets;  // of each id's shard in one rank's packed chunk
    int64_t chunk = 0;
    torch::Tensor send, recv;      // [chunk] (a view of recv: in place), [world · chunk]; model dtype
    comm::Work work;
  };
  // Starts gathering those of `ids` that are neither gathered nor already pending.
  std::unique_ptr<Pending> gather_async(const std::vector<size_t>& ids);
  void finish(std::unique_ptr<Pending> pending);
  void gather(const std::vector<size_t>& ids) { finish(gather_async(ids)); }
  // Re-gathers `ids` even when gathered (their shards changed: after an optimizer step).
  void refresh(const std::vector<size_t>& ids);
  // Frees a non-persistent, unheld parameter's full data.
  void release(size_t id);

  size_t size() const { return params_.size(); }
  ShardedParam& operator[](size_t id) { return params_[id]; }
  const ShardedParam& operator[](size_t id) const { return params_[id]; }
  std::optional<size_t> find(const std::string& name) const;
  size_t num_groups() const { return storage_.size(); }
  const torch::Tensor& storage(size_t g) const { return storage_[g]; }  // [group shard numel], model dtype
  const FlatGroup& layout(size_t g) const { return layouts_[g]; }
  int64_t numel() const;
  int64_t live_numel() const { return live_numel_; }  // gathered, non-persistent elements now
  int64_t peak_live_numel() const { return peak_live_numel_; }

 private:
  void set_full(ShardedParam& p, torch::Tensor full);
  void set_released(ShardedParam& p);

  comm::Communicator& comm_;
  DtypePlan plan_;
  MemoryLedger& ledger_;
  Tier tier_;
  std::vector<ShardedParam> params_;
  std::vector<torch::Tensor> storage_;
  std::vector<FlatGroup> layouts_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<bool> pending_;
  int64_t live_numel_ = 0, peak_live_numel_ = 0;
};

}  // namespace ds::zero
