#include "models/sequence_layout.h"

#include "models/causal_lm.h"
#include "util/error.h"

namespace ds::models {

SequenceLayout SequenceLayout::from_segments(const torch::Tensor& segment_ids, const torch::Tensor& position_ids) {
  DS_CHECK(segment_ids.dim() == 2 && position_ids.sizes() == segment_ids.sizes(), Error,
           "sequence layout: segment ids " + shape_str(segment_ids.sizes()) + " and position ids " +
               shape_str(position_ids.sizes()) + " must both be [B,T]");
  SequenceLayout l;
  l.position_ids = position_ids.to(torch::kLong);
  l.blocked = (segment_ids.unsqueeze(2) != segment_ids.unsqueeze(1)).unsqueeze(1);  // [B,1,T,T]
  return l;
}

const SequenceLayout* current_layout(const SequenceLayoutSlot& slot, int64_t b, int64_t t) {
  if (!slot || !slot->has_value()) return nullptr;
  const SequenceLayout& l = **slot;
  DS_CHECK(l.position_ids.size(0) == b && l.position_ids.size(1) == t, Error,
           "the model's sequence layout is " + shape_str(l.position_ids.sizes()) + " but the batch is [" +
               std::to_string(b) + "," + std::to_string(t) + "]; set_sequence_layout for each batch");
  return &l;
}

}  // namespace ds::models
