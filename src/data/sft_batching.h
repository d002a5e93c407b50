// Fine-tuning examples into fixed-shape rows, two ways. Packing: consecutive examples share a row
// (next-fit, an example is never split), each a document with its own positions (0, 1, ...) and
// segment id, so a model given the segments attends only within a document (models/
// sequence_layout.h). Padding: one example per row, right-padded, attention_mask 0 on the pad.
// Targets are aligned with the inputs (targets[t] = the label of token t+1 of the same document;
// the last token of each document and every pad predict nothing, -100): the loss of a packed row
// is exactly the sum of its documents' own losses.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/sft_example.h"

namespace ds::data {

// Groups of example indices, in order, each fitting in `seq_len` tokens. Every example must already
// be at most seq_len long (read_sft_jsonl's max_tokens).
std::vector<std::vector<int64_t>> pack_examples(const std::vector<SftExample>& examples, int64_t seq_len);

// One group per example: the padding mode's items.
std::vector<std::vector<int64_t>> one_per_row(const std::vector<SftExample>& examples);

struct TokenRows {
  int64_t rows = 0, seq = 0;
  // Row-major [rows, seq]. segment_ids: the document's index within its row, -1 on padding.
  std::vector<int64_t> input_ids, targets, position_ids, segment_ids, attention_mask;
};

// Rows for the items `picked` (indices into `items`). seq_len > 0: every row has that length;
// 0: the longest row among them (dynamic padding). Padding uses `pad_id`.
TokenRows build_rows(const std::vector<SftExample>& examples, const std::vector<std::vector<int64_t>>& items,
                     std::span<const int64_t> picked, int64_t seq_len, int32_t pad_id);

}  // namespace ds::data
