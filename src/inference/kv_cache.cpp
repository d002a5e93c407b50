#include "inference/kv_cache.h"

#include <string>

#include "util/error.h"

namespace ds::inference {

int64_t KvCacheShape::block_bytes(torch::ScalarType dtype) const {
  return 2 * num_layers * block_size * kv_heads * head_dim * static_cast<int64_t>(c10::elementSize(dtype));
}

KvCache::KvCache(const KvCacheShape& shape, torch::ScalarType dtype, torch::Device device)
    : shape_(shape), allocator_(shape.num_blocks) {
  if (shape.block_size <= 0)
    throw ConfigError("kv_block_size", "must be > 0, got " + std::to_string(shape.block_size));
  DS_ASSERT(shape.num_layers > 0 && shape.kv_heads > 0 && shape.head_dim > 0, "KV cache shape from the model");
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  const int64_t slots = shape.num_blocks * shape.block_size;
  try {
    for (int64_t l = 0; l < shape.num_layers; ++l) {
      keys_.push_back(torch::zeros({slots, shape.kv_heads, shape.head_dim}, opts));
      values_.push_back(torch::zeros({slots, shape.kv_heads, shape.head_dim}, opts));
    }
  } catch (const c10::Error& e) {
    throw OutOfMemory("KV cache of " + std::to_string(shape.num_blocks) + " blocks (" +
                      std::to_string(shape.num_blocks * shape.block_bytes(dtype) >> 20) +
                      " MiB) could not be allocated (lower num_kv_blocks or kv_cache_mib): " + e.what_without_backtrace());
  }
  bytes_ = shape.num_blocks * shape.block_bytes(dtype);
}

}  // namespace ds::inference
