// ds::inference::RaggedBatch: the input of one ragged forward. Several sequences, each in its own
// phase (a prompt chunk of n tokens, or one decode token), flattened into one row per new token,
// plus the index tensors attention needs to read and write the blocked KV cache. Built once per
// step and shared by every layer.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <span>
#include <vector>

namespace ds::inference {

// One sequence's share of a forward: `tokens` are new (their keys and values get written), at
// positions start .. start+n-1; the sequence's first `start` tokens are already in the cache.
// `block_table` lists the sequence's blocks in order and covers at least start + n tokens.
struct ChunkView {
  std::span<const int64_t> tokens;
  int64_t start = 0;
  std::span<const int32_t> block_table;
};

class RaggedBatch {
 public:
  RaggedBatch(std::span<const ChunkView> views, int64_t block_size, torch::Device device);
  // The batch rebuilt from another process's wire() (tensor-parallel followers run the leader's batch).
  static RaggedBatch from_wire(std::span<const int64_t> wire, torch::Device device);

  // What the batch was built from, as int64s: block size, sequence count, then per sequence (tokens,
  // start, block-table length), then every sequence's tokens, then every block table. Small (no
  // context slots): what one process sends another to run the same forward.
  const std::vector<int64_t>& wire() const noexcept { return wire_; }

  int64_t num_tokens() const noexcept { return num_tokens_; }
  int64_t num_sequences() const noexcept { return num_sequences_; }

  torch::Tensor token_ids;  // int64 [N]
  torch::Tensor positions;  // int64 [N]
  torch::Tensor slots;      // int64 [N]: cache slot each new token's keys/values go to
  torch::Tensor last_rows;  // int64 [S]: the row of each sequence's last new token (its logits)

  // Sequences with several new tokens (prompt chunks): attended one by one.
  struct Chunk {
    int64_t row = 0;      // first row in the flat batch
    int64_t start = 0;    // position of its first new token
    int64_t n = 0;        // new tokens
    torch::Tensor context_slots;  // int64 [start + n]: the cache slots of positions 0 .. start+n-1
  };
  std::vector<Chunk> chunks;

  // Sequences with one new token (decodes): attended together, padded to the longest context.
  torch::Tensor decode_rows;       // int64 [Sd]
  torch::Tensor decode_slots;      // int64 [Sd, Cmax]: slots of positions 0 .. Cmax-1 (pads: slot 0)
  torch::Tensor decode_positions;  // int64 [Sd]: position of the new token (context = position + 1)
  int64_t num_decodes = 0;

 private:
  int64_t num_tokens_ = 0;
  int64_t num_sequences_ = 0;
  std::vector<int64_t> wire_;
};

}  // namespace ds::inference
