#include "data/distributed_sampler.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "util/error.h"
#include "util/splitmix64.h"

namespace ds::data {
namespace {

// The SplitMix generator: advance the state, return its hash.
uint64_t next_random(uint64_t& state) {
  const uint64_t z = splitmix64(state);
  state += 0x9E3779B97F4A7C15ull;
  return z;
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options)
    : size_(dataset_size), opt_(options) {
  DS_CHECK(size_ >= 1, Error, "the sampler has no data (0 items)");
  DS_CHECK(opt_.world_size >= 1 && opt_.rank >= 0 && opt_.rank < opt_.world_size, Error,
           "sampler rank " + std::to_string(opt_.rank) + " is outside world size " + std::to_string(opt_.world_size));
  if (opt_.drop_last) {
    DS_CHECK(size_ >= opt_.world_size, Error,
             std::to_string(size_) + " items cannot give each of " + std::to_string(opt_.world_size) +
                 " ranks one with drop_last; use more data or fewer ranks");
    num_samples_ = size_ / opt_.world_size;  // torch: ceil((n - w) / w) == floor(n / w)
  } else {
    num_samples_ = (size_ + opt_.world_size - 1) / opt_.world_size;
  }
}

std::vector<int64_t> DistributedSampler::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), 0);
  if (opt_.shuffle) {
    uint64_t state = opt_.seed + static_cast<uint64_t>(epoch);
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[next_random(state) % (i + 1)]);
  }
  const size_t total = static_cast<size_t>(total_size());
  for (size_t i = 0; order.size() < total; ++i) order.push_back(order[i]);  // pad with the start, as torch
  order.resize(total);                                                       // or drop the tail
  return order;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  auto order = epoch_order(epoch);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(opt_.rank); i < order.size(); i += static_cast<size_t>(opt_.world_size))
    mine.push_back(order[i]);
  return mine;
}

SampledBatches::SampledBatches(DistributedSampler sampler, int64_t micro_batch, bool drop_last)
    : sampler_(std::move(sampler)), micro_(micro_batch) {
  DS_CHECK(micro_ >= 1, Error, "micro-batch size must be at least 1");
  const int64_t n = sampler_.num_samples();
  per_epoch_ = drop_last ? n / micro_ : (n + micro_ - 1) / micro_;
  DS_CHECK(per_epoch_ >= 1, Error,
           "each rank has " + std::to_string(n) + " items, fewer than one micro-batch of " + std::to_string(micro_) +
               " with dataloader_drop_last; use more data, fewer ranks or a smaller train_micro_batch_size_per_gpu");
}

std::vector<int64_t> SampledBatches::batch(int64_t k) const {
  const int64_t epoch = k / per_epoch_, first = (k % per_epoch_) * micro_;
  if (epoch != cached_epoch_) {
    cached_ = sampler_.indices(epoch);
    cached_epoch_ = epoch;
  }
  const int64_t end = std::min<int64_t>(first + micro_, static_cast<int64_t>(cached_.size()));
  return {cached_.begin() + first, cached_.begin() + end};
}

}  // namespace ds::data
