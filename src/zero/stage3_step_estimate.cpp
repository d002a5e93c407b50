#include "zero/stage3_step_estimate.h"

#include <algorithm>

#include "zero/memory_estimate.h"
#include "zero/reuse_plan.h"

namespace ds::zero {
namespace {

// The coordinator's state over one model, replayed pass by pass.
class Replay {
 public:
  Replay(const Stage3StepInput& in, const ZeroConfig& zero) : in_(in), gathered_(in.param_numels.size()) {
    persistent_ = persistent_params(in.param_numels, zero);
    const size_t n = in.layer_params.size();
    last_backward_.assign(in.param_numels.size(), n);  // the lowest layer using it: its gradient is whole there
    for (size_t l = n; l-- > 0;)
      for (size_t id : in.layer_params[l]) last_backward_[id] = l;
    // Persistent parameters stay gathered and uncounted; those of no layer stay gathered and counted.
    for (size_t id = 0; id < gathered_.size(); ++id) {
      held_.push_back(persistent_[id] || last_backward_[id] == n);
      if (held_[id]) gather({id});
    }
    std::vector<size_t> trace;  // a forward, then a backward
    for (size_t l = 0; l < n; ++l) trace.push_back(l);
    for (size_t l = n; l-- > 0;) trace.push_back(l);
    keep_ = reuse_plan(trace, in.layer_params, in.param_numels, zero.max_reuse_distance);
  }

  void pass(bool traced) {
    const size_t n = in_.layer_params.size();
    size_t at = 0;
    for (size_t l = 0; l < n; ++l, ++at) {
      gather(in_.layer_params[l]);
      const auto& ids = in_.layer_params[l];
      for (size_t k = 0; k < ids.size(); ++k)
        if (!traced || !keep_[at][k]) release(ids[k]);
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

  const Stage3StepInput& in_;
  std::vector<bool> gathered_, persistent_, held_;
  std::vector<size_t> last_backward_;
  std::vector<std::vector<bool>> keep_;  // reuse_plan over the forward-then-backward trace
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
