#include "inference/ragged_batch.h"

#include <algorithm>

#include "util/error.h"

namespace ds::inference {
namespace {

// Slots of positions 0 .. len-1 of a sequence with `table`, appended to `out`.
void append_slots(std::span<const int32_t> table, int64_t len, int64_t block_size, std::vector<int64_t>& out) {
  DS_ASSERT(static_cast<int64_t>(table.size()) * block_size >= len, "block table shorter than the context");
  for (int64_t p = 0; p < len; ++p) out.push_back(table[static_cast<size_t>(p / block_size)] * block_size + p % block_size);
}

torch::Tensor to_tensor(std::vector<int64_t>& v, torch::Device device) {
  return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}, torch::kLong).clone().to(device);
}

}  // namespace

RaggedBatch::RaggedBatch(std::span<const ChunkView> views, int64_t block_size, torch::Device device) {
  wire_ = {block_size, static_cast<int64_t>(views.size())};
  for (const auto& c : views)
    wire_.insert(wire_.end(), {static_cast<int64_t>(c.tokens.size()), c.start, static_cast<int64_t>(c.block_table.size())});
  for (const auto& c : views) wire_.insert(wire_.end(), c.tokens.begin(), c.tokens.end());
  for (const auto& c : views) wire_.insert(wire_.end(), c.block_table.begin(), c.block_table.end());

  std::vector<int64_t> ids, pos, slot, last, drows, dpos, dslots;
  int64_t cmax = 0;
  for (const auto& c : views)
    if (c.tokens.size() == 1) cmax = std::max(cmax, c.start + 1);  // decodes' longest context
  for (const auto& c : views) {
    const int64_t n = static_cast<int64_t>(c.tokens.size());
    DS_ASSERT(n > 0, "a scheduled chunk has no tokens");
    const int64_t row = static_cast<int64_t>(ids.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = c.start + i;
      ids.push_back(c.tokens[static_cast<size_t>(i)]);
      pos.push_back(p);
      DS_ASSERT(p / block_size < static_cast<int64_t>(c.block_table.size()), "no block for a new token");
      slot.push_back(c.block_table[static_cast<size_t>(p / block_size)] * block_size + p % block_size);
    }
    last.push_back(row + n - 1);
    if (n == 1) {
      drows.push_back(row);
      dpos.push_back(c.start);
      const size_t before = dslots.size();
      append_slots(c.block_table, c.start + 1, block_size, dslots);
      dslots.resize(before + static_cast<size_t>(cmax), 0);
      ++num_decodes;
    } else {
      std::vector<int64_t> ctx;
      append_slots(c.block_table, c.start + n, block_size, ctx);
      this->chunks.push_back({row, c.start, n, to_tensor(ctx, device)});
    }
  }
  num_tokens_ = static_cast<int64_t>(ids.size());
  num_sequences_ = static_cast<int64_t>(views.size());
  token_ids = to_tensor(ids, device);
  positions = to_tensor(pos, device);
  slots = to_tensor(slot, device);
  last_rows = to_tensor(last, device);
  decode_rows = to_tensor(drows, device);
  decode_positions = to_tensor(dpos, device);
  decode_slots = to_tensor(dslots, device).view({num_decodes, num_decodes ? cmax : 0});
}

RaggedBatch RaggedBatch::from_wire(std::span<const int64_t> wire, torch::Device device) {
  DS_CHECK(wire.size() >= 2, Error, "RaggedBatch::from_wire: " + std::to_string(wire.size()) + " values, no header");
  const int64_t block_size = wire[0], s = wire[1];
  DS_CHECK(block_size > 0 && s >= 0 && static_cast<int64_t>(wire.size()) >= 2 + 3 * s, Error,
           "RaggedBatch::from_wire: a malformed header");
  int64_t tokens = 0, tables = 0;
  for (int64_t i = 0; i < s; ++i) {
    tokens += wire[static_cast<size_t>(2 + 3 * i)];
    tables += wire[static_cast<size_t>(4 + 3 * i)];
  }
  DS_CHECK(static_cast<int64_t>(wire.size()) == 2 + 3 * s + tokens + tables, Error,
           "RaggedBatch::from_wire: " + std::to_string(wire.size()) + " values, the header describes " +
               std::to_string(2 + 3 * s + tokens + tables));
  std::vector<int32_t> table_values(wire.begin() + 2 + 3 * s + tokens, wire.end());
  std::vector<ChunkView> views;
  size_t tok = static_cast<size_t>(2 + 3 * s), tab = 0;
  for (int64_t i = 0; i < s; ++i) {
    const auto n = static_cast<size_t>(wire[static_cast<size_t>(2 + 3 * i)]);
    const auto t = static_cast<size_t>(wire[static_cast<size_t>(4 + 3 * i)]);
    views.push_back({wire.subspan(tok, n), wire[static_cast<size_t>(3 + 3 * i)],
                     std::span<const int32_t>(table_values).subspan(tab, t)});
    tok += n;
    tab += t;
  }
  return RaggedBatch(views, block_size, device);
}

}  // namespace ds::inference
