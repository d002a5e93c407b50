// ds::inference::BlockAllocator: the KV cache's block pool (fixed-size blocks, each holding the keys
// and values of `block_size` consecutive tokens of one sequence in every layer). Blocks are
// reference counted so that sequences sharing a prompt prefix can share its full blocks (prefix
// caching): a full block may be published under its content (the tokens it holds and the block
// before it); when its last user releases it, it stays findable ("cached") until the pool needs it
// again, least recently released first. Torch-free; the tensors live in KvCache.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace ds::inference {

// What identifies a full block's contents: the content id of the block before it (0 for the first
// block of a sequence) and its tokens. Content ids are never reused, so a key naming a block that
// was since evicted can never match again.
struct BlockKey {
  uint64_t parent = 0;
  std::vector<int64_t> tokens;
  auto operator<=>(const BlockKey&) const = default;
};

class BlockAllocator {
 public:
  explicit BlockAllocator(int64_t num_blocks);

  int64_t num_blocks() const noexcept { return num_blocks_; }
  // Blocks allocate() can hand out now: never-used and cached-but-unreferenced ones.
  int64_t num_free() const noexcept { return static_cast<int64_t>(free_.size() + cached_.size()); }
  int64_t num_used() const noexcept { return num_blocks_ - num_free(); }
  int64_t num_cached() const noexcept { return static_cast<int64_t>(cached_.size()); }

  // A block with reference count 1, or nullopt when every block is referenced. Takes a never-used
  // block first, else evicts the least recently released cached block (its key is forgotten).
  std::optional<int32_t> allocate();
  // Drops one reference; at zero a published block becomes cached, any other block free.
  void release(int32_t block);

  // Prefix caching. publish: makes a full, computed block findable under `key` and returns its
  // content id (the parent of the next block's key); when another block already holds that content,
  // that block's id is returned and `block` stays private. lookup: the block holding `key` with one
  // more reference (reviving it if cached) and its content id, or nullopt.
  uint64_t publish(int32_t block, BlockKey key);
  std::optional<std::pair<int32_t, uint64_t>> lookup(const BlockKey& key);

  int32_t ref_count(int32_t block) const { return blocks_.at(static_cast<size_t>(block)).refs; }
  int64_t prefix_hits() const noexcept { return prefix_hits_; }

 private:
  struct BlockState {
    int32_t refs = 0;
    uint64_t content_id = 0;  // 0: not published
    std::map<BlockKey, int32_t>::iterator key_it;
    std::list<int32_t>::iterator cached_it;  // valid while refs == 0 and published
  };

  void forget(int32_t block);

  int64_t num_blocks_;
  std::vector<BlockState> blocks_;
  std::vector<int32_t> free_;   // refs 0, unpublished (a stack: recently freed reused first)
  std::list<int32_t> cached_;   // refs 0, published; front = least recently released
  std::map<BlockKey, int32_t> index_;
  uint64_t next_content_id_ = 1;
  int64_t prefix_hits_ = 0;
};

}  // namespace ds::inference
