#include "zero/stage3_step_estimate.h"

#include <algorithm>

namespace ds::zero {
namespace {

// The coordinator's state over one model, replayed pass by pass.
class Replay {
 public:
  Replay(const Stage3StepInput& in, const ZeroConfig& zero) : in_(in), zero_(zero), gathered_(in.param_numels.size()) {
    int64_t persistent_total = 0;  // ShardedParameters' rule, in model order
    for (int64_t numel : in.param_numels) {
      const bool p = numel <= zero.param_persistence_threshold && persistent_total + numel <= zero.model_persistence_threshold;
      if (p) persistent_total += numel;
      persistent_.push_back(p);
    }
    const size_t n = in.layer_params.size();
    last_backward_.assign(in.param_numels.size(), n);  // the lowest layer using it: its gradient is whole there
    for (size_t l = n; l-- > 0;)
      for (size_t id : in.layer_params[l]) last_backward_[id] = l;
    // Persistent parameters stay gathered and uncounted; those of no layer stay gathered and counted.
    for (size_t id = 0; id < gathered_.size(); ++id) {
      held_.push_back(persistent_[id] || last_backward_[id] == n);
      if (held_[id]) gather({id});
    }
    for (size_t l = 0; l < n; ++l) trace_.push_back(l);
    for (size_t l = n; l-- > 0;) trace_.push_back(l);
  }

  void pass(bool traced) {
    const size_t n = in_.layer_params.size();
    size_t at = 0;
    for (size_t l = 0; l < n; ++l, ++at) {
      gather(in_.layer_params[l]);
      for (size_t id : in_.layer_params[l])
        if (!traced || !reused_soon(at, id)) release(id);
    }
    for (size_t l = n; l-- > 0;) {
      gather(in_.layer_params[l]);
      for (size_t id : in_.layer_params[l])
        if (last_backward_[id] == l) release(id);
    }
    for (size_t id = 0; id < gathered_.size(); ++id) release(id);
  }

  int64_t peak() const { return peak_; }

 private:
  bool counted(size_t id) const { return !persistent_[id]; }
  void gather(const std::vector<size_t>& ids) {
    for (size_t id : ids)
      if (!gathered_[id]) {
        gathered_[id] = true;
        if (counted(id)) live_ += in_.param_numels[id];
      }
    peak_ = std::max(peak_, live_);
  }
  void release(size_t id) {
    if (!gathered_[id] || held_[id]) return;
    gathered_[id] = false;
    live_ -= in_.param_numels[id];
  }
  // ParamCoordinator::record_trace's scan: from the next fetch on, while fewer than
  // max_reuse_distance elements have been passed, is `id` fetched again?
  bool reused_soon(size_t at, size_t id) const {
    int64_t traversed = 0;
    for (size_t next = at + 1; next < trace_.size() && traversed < zero_.max_reuse_distance; ++next)
      for (size_t other : in_.layer_params[trace_[next]]) {
        if (other == id) return true;
        traversed += in_.param_numels[other];
      }
    return false;
  }

  const Stage3StepInput& in_;
  const ZeroConfig& zero_;
  std::vector<bool> gathered_, persistent_, held_;
  std::vector<size_t> last_backward_, trace_;
  int64_t live_ = 0, peak_ = 0;
};

}  // namespace

int64_t stage3_peak_gathered_numel(const Stage3StepInput& in, const ZeroConfig& zero) {
  Replay replay(in, zero);
  replay.pass(/*traced=*/false);  // the first step records the trace
  replay.pass(/*traced=*/true);
  return replay.peak();
}

}  // namespace ds::zero
