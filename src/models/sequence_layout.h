// Packed rows for the models: several documents in one row of token ids (data/sft_batching.h),
// each with positions restarting at 0 and attention kept inside it — a block-diagonal causal mask.
// A CausalLM holds the layout of the batch it is about to run (CausalLM::set_sequence_layout) in a
// slot its layers share, so recomputation in backward (activation checkpointing) and ZeRO-3's
// layer walk see the same layout as the forward did.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>

namespace ds::models {

struct SequenceLayout {
  torch::Tensor position_ids;  // int64 [B,T]: each token's position within its document
  torch::Tensor blocked;       // bool [B,1,T,T]: true where query i may not attend key j (other document)

  // From per-token document ids [B,T] (any integers; equal ids = same document, a padding run is
  // one more "document") and position ids [B,T].
  static SequenceLayout from_segments(const torch::Tensor& segment_ids, const torch::Tensor& position_ids);
};

using SequenceLayoutSlot = std::shared_ptr<std::optional<SequenceLayout>>;

// The layout in `slot` if set, after checking it matches token ids / activations of [B,T].
const SequenceLayout* current_layout(const SequenceLayoutSlot& slot, int64_t b, int64_t t);

}  // namespace ds::models
