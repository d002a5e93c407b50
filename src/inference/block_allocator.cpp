#include "inference/block_allocator.h"

#include <string>

#include "util/error.h"

namespace ds::inference {

BlockAllocator::BlockAllocator(int64_t num_blocks) : num_blocks_(num_blocks) {
  if (num_blocks <= 0 || num_blocks >= (int64_t{1} << 31))
    throw ConfigError("num_kv_blocks", "must be in [1, 2^31), got " + std::to_string(num_blocks) +
                                           " (give the KV cache at least one block)");
  blocks_.resize(static_cast<size_t>(num_blocks));
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

std::optional<int32_t> BlockAllocator::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!cached_.empty()) {
    b = cached_.front();
    cached_.pop_front();
    forget(b);
  } else {
    return std::nullopt;
  }
  blocks_[static_cast<size_t>(b)].refs = 1;
  return b;
}

void BlockAllocator::release(int32_t block) {
  auto& s = blocks_.at(static_cast<size_t>(block));
  DS_ASSERT(s.refs > 0, "KV block " + std::to_string(block) + " released more often than referenced");
  if (--s.refs > 0) return;
  if (s.content_id != 0) {
    s.cached_it = cached_.insert(cached_.end(), block);
  } else {
    free_.push_back(block);
  }
}

void BlockAllocator::forget(int32_t block) {
  auto& s = blocks_[static_cast<size_t>(block)];
  if (s.content_id == 0) return;
  index_.erase(s.key_it);
  s.content_id = 0;
}

uint64_t BlockAllocator::publish(int32_t block, BlockKey key) {
  auto& s = blocks_.at(static_cast<size_t>(block));
  DS_ASSERT(s.refs > 0, "publishing an unreferenced KV block");
  if (s.content_id != 0) return s.content_id;
  auto [it, inserted] = index_.emplace(std::move(key), block);
  if (!inserted) return blocks_[static_cast<size_t>(it->second)].content_id;
  s.content_id = next_content_id_++;
  s.key_it = it;
  return s.content_id;
}

std::optional<std::pair<int32_t, uint64_t>> BlockAllocator::lookup(const BlockKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  const int32_t b = it->second;
  auto& s = blocks_[static_cast<size_t>(b)];
  if (s.refs == 0) cached_.erase(s.cached_it);
  ++s.refs;
  ++prefix_hits_;
  return std::make_pair(b, s.content_id);
}

}  // namespace ds::inference
