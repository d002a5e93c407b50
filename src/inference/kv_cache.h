// ds::inference::KvCache: the keys and values of every cached token, in fixed-size blocks. Per layer
// one key and one value tensor [num_blocks · block_size, kv_heads, head_dim] (slot s = block ·
// block_size + offset), so a sequence grows by taking another block and nothing already cached
// ever moves. Which blocks a sequence owns is its block table (Sequence); the pool is BlockAllocator.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "inference/block_allocator.h"

namespace ds::inference {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;

  // Bytes of one block over all layers (keys and values) at `dtype`.
  int64_t block_bytes(torch::ScalarType dtype) const;
};

class KvCache {
 public:
  KvCache(const KvCacheShape& shape, torch::ScalarType dtype, torch::Device device);

  const KvCacheShape& shape() const noexcept { return shape_; }
  int64_t block_size() const noexcept { return shape_.block_size; }
  BlockAllocator& allocator() noexcept { return allocator_; }
  const BlockAllocator& allocator() const noexcept { return allocator_; }

  // [num_blocks · block_size, kv_heads, head_dim] of layer `layer`.
  torch::Tensor& keys(int64_t layer) { return keys_.at(static_cast<size_t>(layer)); }
  torch::Tensor& values(int64_t layer) { return values_.at(static_cast<size_t>(layer)); }
  int64_t bytes() const noexcept { return bytes_; }

 private:
  KvCacheShape shape_;
  BlockAllocator allocator_;
  std::vector<torch::Tensor> keys_, values_;
  int64_t bytes_ = 0;
};

}  // namespace ds::inference
