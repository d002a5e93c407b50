#include "zero/reuse_plan.h"

namespace ds::zero {

std::vector<std::vector<bool>> reuse_plan(const std::vector<size_t>& trace,
                                          const std::vector<std::vector<size_t>>& layer_params,
                                          const std::vector<int64_t>& numels, int64_t max_reuse_distance) {
  // DeepSpeed's scan: from the next fetch on, a layer is examined while fewer than
  // max_reuse_distance elements have been passed; each parameter it uses is kept.
  std::vector<std::vector<bool>> keep_at(trace.size());
  for (size_t at = 0; at < trace.size(); ++at) {
    const auto& ids = layer_params[trace[at]];
    std::vector<bool> keep(ids.size(), false);
    int64_t traversed = 0;
    for (size_t next = at + 1; next < trace.size() && traversed < max_reuse_distance; ++next)
      for (size_t id : layer_params[trace[next]]) {
        for (size_t k = 0; k < ids.size(); ++k) keep[k] = keep[k] || ids[k] == id;
        traversed += numels[id];
      }
    keep_at[at] = std::move(keep);
  }
  return keep_at;
}

}  // namespace ds::zero
