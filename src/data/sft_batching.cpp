#include "data/sft_batching.h"

#include <algorithm>

#include "util/error.h"

namespace ds::data {
namespace {

int64_t length(const SftExample& e) { return static_cast<int64_t>(e.ids.size()); }

}  // namespace

std::vector<std::vector<int64_t>> pack_examples(const std::vector<SftExample>& examples, int64_t seq_len) {
  DS_CHECK(seq_len >= 2, Error, "packing needs a sequence length of at least 2");
  std::vector<std::vector<int64_t>> rows;
  int64_t used = seq_len;  // forces a first row
  for (int64_t i = 0; i < static_cast<int64_t>(examples.size()); ++i) {
    const int64_t n = length(examples[static_cast<size_t>(i)]);
    DS_ASSERT(n <= seq_len, "example longer than the packed row (truncate when reading)");
    if (used + n > seq_len) {
      rows.emplace_back();
      used = 0;
    }
    rows.back().push_back(i);
    used += n;
  }
  return rows;
}

std::vector<std::vector<int64_t>> one_per_row(const std::vector<SftExample>& examples) {
  std::vector<std::vector<int64_t>> rows(examples.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = {static_cast<int64_t>(i)};
  return rows;
}

TokenRows build_rows(const std::vector<SftExample>& examples, const std::vector<std::vector<int64_t>>& items,
                     std::span<const int64_t> picked, int64_t seq_len, int32_t pad_id) {
  TokenRows out;
  out.rows = static_cast<int64_t>(picked.size());
  out.seq = seq_len;
  if (seq_len == 0)
    for (int64_t it : picked) {
      int64_t n = 0;
      for (int64_t e : items.at(static_cast<size_t>(it))) n += length(examples.at(static_cast<size_t>(e)));
      out.seq = std::max(out.seq, n);
    }
  const size_t total = static_cast<size_t>(out.rows * out.seq);
  out.input_ids.assign(total, pad_id);
  out.targets.assign(total, kIgnoreLabel);
  out.position_ids.assign(total, 0);
  out.segment_ids.assign(total, -1);
  out.attention_mask.assign(total, 0);
  for (int64_t r = 0; r < out.rows; ++r) {
    int64_t t = r * out.seq, end = t + out.seq, seg = 0;
    for (int64_t e : items.at(static_cast<size_t>(picked[static_cast<size_t>(r)]))) {
      const SftExample& ex = examples.at(static_cast<size_t>(e));
      const int64_t n = length(ex);
      DS_CHECK(t + n <= end, Error, "a row's examples exceed the sequence length " + std::to_string(out.seq));
      for (int64_t k = 0; k < n; ++k, ++t) {
        out.input_ids[t] = ex.ids[k];
        out.targets[t] = k + 1 < n ? ex.labels[k + 1] : kIgnoreLabel;  // no prediction across documents
        out.position_ids[t] = k;
        out.segment_ids[t] = seg;
        out.attention_mask[t] = 1;
      }
      ++seg;
    }
    for (int64_t k = 0; t < end; ++t, ++k) out.position_ids[t] = k;  // pad: any valid position
  }
  return out;
}

}  // namespace ds::data
