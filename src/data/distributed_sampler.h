// Which items each data-parallel rank reads, as torch.utils.data.DistributedSampler (which
// DeepSpeed's dataloader uses) decides it: each epoch a permutation seeded by seed + epoch (the
// same on every rank), padded by repeating its start to a multiple of the world size (or, with
// drop_last, cut to one), and rank r takes positions r, r + w, r + 2w, ...: disjoint shards that
// together cover the data. The permutation is this file's own (splitmix64 Fisher-Yates), not
// torch's randperm: same rules, different order.
// SampledBatches adds the DataLoader on top: micro-batches of a rank's shard, epoch after epoch,
// addressed by their index from the start of training, so a resumed run continues at any step.
#pragma once

#include <cstdint>
#include <vector>

namespace ds::data {

struct DistributedSamplerOptions {
  int64_t world_size = 1;
  int64_t rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // torch's: drop the tail instead of padding to a multiple of world_size
};

class DistributedSampler {
 public:
  // ds::Error for an empty dataset, world_size < 1, rank outside [0, world_size), or (drop_last)
  // fewer items than ranks.
  DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options);

  int64_t num_samples() const { return num_samples_; }  // per rank per epoch
  int64_t total_size() const { return num_samples_ * opt_.world_size; }
  // This rank's item indices for `epoch`, in order.
  std::vector<int64_t> indices(int64_t epoch) const;
  // The whole epoch's order before sharding (every rank computes the same one).
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  int64_t size_;
  DistributedSamplerOptions opt_;
  int64_t num_samples_;
};

class SampledBatches {
 public:
  // drop_last: DeepSpeed's dataloader_drop_last (a short last micro-batch of an epoch is dropped);
  // otherwise it is used as it is.
  SampledBatches(DistributedSampler sampler, int64_t micro_batch, bool drop_last);

  int64_t batches_per_epoch() const { return per_epoch_; }
  // Micro-batch `k` counted from the start of training (epoch k / batches_per_epoch()).
  std::vector<int64_t> batch(int64_t k) const;

 private:
  DistributedSampler sampler_;
  int64_t micro_, per_epoch_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_;
};

}  // namespace ds::data
