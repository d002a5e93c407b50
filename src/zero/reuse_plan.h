// DeepSpeed's stage-3 release rule (__params_to_release) over a fetch trace: which parameters of the
// layer fetched at each trace position are fetched again before stage3_max_reuse_distance elements
// have been fetched from there on, and so stay gathered. The ParamCoordinator runs it on the first
// step's recorded trace; zero::stage3_peak_gathered_numel on a forward-then-backward trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds::zero {

// keep[at][k]: parameter k of layer trace[at] is reused soon. `layer_params` lists each layer's
// parameter ids; `numels` is indexed by id.
std::vector<std::vector<bool>> reuse_plan(const std::vector<size_t>& trace,
                                          const std::vector<std::vector<size_t>>& layer_params,
                                          const std::vector<int64_t>& numels, int64_t max_reuse_distance);

}  // namespace ds::zero
