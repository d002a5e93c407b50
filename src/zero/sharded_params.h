// Stage 3 parameter storage (reference §5.1): every trainable parameter is sharded on its own —
// ceil(numel / world) elements per rank, the tail padded — and this rank keeps only its shards, in
// the model dtype, concatenated per param group. A module parameter keeps its shape but, while
// released, its data is a single NaN broadcast to that shape (one element of memory; anything that
// reads it un-gathered produces NaN, never plausible numbers). Gathering all-gathers the shards of a
// set of parameters in one collective and gives each parameter its full compute-dtype data again.
// Small parameters (stage3_param_persistence_threshold, model_persistence_threshold) stay gathered.
// With zero_quantized_weights (ZeRO++ qwZ) a gather moves int8 values with one fp32 scale per group
// of up to 8000 elements (DeepSpeed's group sizes), about half a bf16 gather's bytes; the shards and
// the optimizer keep full precision, only the gathered copies carry the rounding. (On NVMe such a
// gather reads its shards before quantizing them, so it does not overlap the disk.)
//
// With zero_hpz_partition_size h (ZeRO++ hpZ) a parameter released after its forward also keeps
// 1/h of the values it was computed with (a secondary partition over the h consecutive ranks of its
// hpZ group, model dtype, DeepSpeed's ds_secondary_tensor), and the backward gathers from those
// inside the group: across nodes only forward gathers travel. The optimizer step invalidates them.
//
// Where the shards live is the tier: Device (with the module), Cpu (offload_param.device "cpu":
// host memory) or Nvme (offload_param.device "nvme": one swap file per shard, offload::ParamSwapper).
// On NVMe a gather reads each shard straight into its slot of the all-gather buffer — slots are
// 4 KiB-aligned there — so the prefetch of the next layer is a disk read in flight while this layer
// computes; after the optimizer, write_range streams the new values back to the files.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/communicator.h"
#include "aio/aio_engine.h"
#include "comm/work.h"
#include "config/aio_config.h"
#include "config/zero_config.h"
#include "offload/param_swapper.h"
#include "util/memory_ledger.h"
#include "zero/dtype_plan.h"
#include "zero/flat_params.h"
#include "zero/partition.h"

namespace ds::zero {

// What a gather is for. Forward, Backward: the copies a layer's forward or backward reads, which qwZ
// (zero_quantized_weights) may move in int8 and which, in backward, hpZ may gather from the
// secondary partition inside the node. Exact: everything else (GatheredParameters guards, saving
// the 16-bit model, persistent and unlisted parameters), always bit-exact from the primary shards,
// as DeepSpeed's param.all_gather() is.
enum class GatherFor { Forward, Backward, Exact };

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
  torch::Tensor secondary;       // hpZ: [ceil(numel / h)] of the values last computed with, model dtype
  bool secondary_valid = false;  // holds the current values (set at release, cleared by an update)
  torch::Tensor placeholder;     // [1] NaN, compute dtype: the data while released (one per parameter,
                                 // so a read of it can be traced back to the parameter)
};

class ShardedParameters {
 public:
  // `params` hold full values (identical on every rank); afterwards each keeps only its shard.
  // Tier Nvme needs `aio` (the engine's aio section) and zero.offload_param.nvme_path. `hpz`: the
  // hpZ group (consecutive ranks of `comm`), when zero_hpz_partition_size > 1.
  ShardedParameters(comm::Communicator& comm, const DtypePlan& plan, const ZeroConfig& zero,
                    const std::vector<NamedParam>& params, MemoryLedger& ledger, Tier tier,
                    const AioConfig* aio = nullptr, comm::Communicator* hpz = nullptr);
  ~ShardedParameters();

  // A started gather of some parameters; finish() makes them usable.
  struct Pending {
    std::vector<size_t> ids;
    std::vector<int64_t> offsets;  // of each id's shard in one rank's packed chunk
    std::vector<int64_t> sizes;    // each id's shard (primary or hpZ secondary) in that chunk
    int64_t chunk = 0;
    comm::Communicator* comm = nullptr;  // the group gathered over: all ranks, or the hpZ group
    torch::Tensor send, recv;      // [chunk] (a view of recv: in place), [world · chunk]; model dtype
    comm::Work work;
    // qwZ (zero_quantized_weights): `send` stands alone, goes out as int8 with one fp32 scale per group
    // (comm/quantize.h), and `recv` is the dequantized fp32 gather, made in finish().
    bool quantized = false;
    int64_t groups = 0;
    torch::Tensor qsend, qrecv, scales, scales_recv;
    comm::Work scale_work;
    std::vector<aio::IoHandle> reads;  // Nvme: shard reads into `send`, waited before the all-gather
    offload::ParamSwapper* swapper = nullptr;
    Pending() = default;
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    // A gather abandoned on an error path: the disk must stop writing into `recv` before it is freed.
    ~Pending() {
      for (const auto& h : reads) {
        try {
          swapper->wait_read(h);
        } catch (...) {  // destructors never throw; the error was or will be reported elsewhere
        }
      }
    }
  };
  // Starts gathering those of `ids` that are neither gathered nor already pending.
  std::unique_ptr<Pending> gather_async(const std::vector<size_t>& ids, GatherFor purpose = GatherFor::Exact);
  void finish(std::unique_ptr<Pending> pending);
  void gather(const std::vector<size_t>& ids, GatherFor purpose = GatherFor::Exact) {
    finish(gather_async(ids, purpose));
  }
  // Re-gathers `ids` even when gathered (their shards changed: after an optimizer step).
  void refresh(const std::vector<size_t>& ids);
  // Frees a non-persistent, unheld parameter's full data.
  void release(size_t id);

  size_t size() const { return params_.size(); }
  ShardedParam& operator[](size_t id) { return params_[id]; }
  const ShardedParam& operator[](size_t id) const { return params_[id]; }
  std::optional<size_t> find(const std::string& name) const;
  // The released parameter whose placeholder storage starts at `data`, if any.
  std::optional<size_t> released_at(const void* data) const;
  size_t num_groups() const { return layouts_.size(); }
  // This rank's shards of group g ([group shard numel], model dtype); on Nvme a copy read from disk.
  torch::Tensor storage(size_t g) const;
  // [offset, offset + n) of it (on Nvme only the shards it overlaps are read).
  torch::Tensor read_range(size_t g, int64_t offset, int64_t n) const;
  // After the optimizer: fp32 values for [offset, offset + master.numel()) of group g's shards,
  // rounded to the model dtype. Spans may come in pieces, in any order; finish_writes() lands them
  // (on Nvme it waits for the files) and must precede the next gather.
  void write_range(size_t g, int64_t offset, const torch::Tensor& master);
  void finish_writes();
  Tier tier() const { return tier_; }
  // Nvme only: the swapper's counters (bytes, waits) for the per-phase report.
  std::optional<offload::ParamSwapStats> swap_stats() const;
  void reset_swap_stats();
  const FlatGroup& layout(size_t g) const { return layouts_[g]; }
  int64_t numel() const;
  int64_t live_numel() const { return live_numel_; }  // gathered, non-persistent elements now
  int64_t peak_live_numel() const { return peak_live_numel_; }

 private:
  void set_full(ShardedParam& p, torch::Tensor full);
  void set_released(ShardedParam& p);
  void setup_swapper(const ZeroConfig& zero, const AioConfig& aio);
  int64_t slot_align() const;  // elements between shard slots of a gather buffer (1 in RAM)
  std::unique_ptr<Pending> gather_quantized_async(std::unique_ptr<Pending> pending);  // qwZ
  // The values `pending` sends for its k-th parameter: its primary shard (Device/Cpu) or its secondary.
  torch::Tensor source(const Pending& pending, size_t k) const;
  void keep_secondary(ShardedParam& p);  // hpZ: this rank's part of p's full values, before release

  struct PartialWrite {  // Nvme: a shard's new values, collected until all of its are in
    aio::AlignedBuffer buffer;
    int64_t filled = 0;
  };

  comm::Communicator& comm_;
  bool quantized_ = false;  // qwZ: Forward/Backward gathers move int8 (zero_quantized_weights, world > 1)
  comm::Communicator* hpz_ = nullptr;  // hpZ group, or nullptr
  DtypePlan plan_;
  MemoryLedger& ledger_;
  Tier tier_;
  std::vector<ShardedParam> params_;
  std::vector<torch::Tensor> storage_;           // Device/Cpu tiers
  std::vector<std::vector<size_t>> group_ids_;   // per group, ids in shard-offset order
  std::unique_ptr<aio::AioEngine> aio_;          // Nvme tier
  std::unique_ptr<offload::ParamSwapper> swapper_;
  std::unordered_map<size_t, PartialWrite> partial_;
  std::vector<FlatGroup> layouts_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<bool> pending_;
  int64_t live_numel_ = 0, peak_live_numel_ = 0;
};

}  // namespace ds::zero
