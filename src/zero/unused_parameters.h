// UnusedParameterCheck: zero_optimization.ignore_unused_parameters false (DeepSpeed's stages 1-2).
// DeepSpeed asserts when a trainable parameter produced no gradient, since in a static network that
// means a layer was left out of the loss by mistake. Each rank notes which parameters autograd
// reached during the accumulation window; at the boundary the ranks add up what they saw, so every
// rank stops together (none is left waiting in the next collective), before any update, naming the
// parameters and on how many ranks each was missed.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace torch::autograd {
struct Node;
}

namespace ds::zero {

class UnusedParameterCheck {
 public:
  // params: the trainable parameters, by name; each must be a leaf that requires a gradient.
  UnusedParameterCheck(std::vector<std::string> names, const std::vector<torch::Tensor>& params);
  ~UnusedParameterCheck();
  UnusedParameterCheck(const UnusedParameterCheck&) = delete;
  UnusedParameterCheck& operator=(const UnusedParameterCheck&) = delete;

  // At the accumulation boundary, on every rank of `comm` alike: throws ConfigError naming
  // zero_optimization.ignore_unused_parameters when some rank's parameter got no gradient since the
  // last call; starts the next window either way.
  void verify(comm::Communicator& comm);

 private:
  std::vector<std::string> names_;
  std::vector<int32_t> used_;  // per parameter: 1 once autograd delivered a gradient this window
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // the variables hold them weakly
  std::vector<uintptr_t> hook_keys_;
};

}  // namespace ds::zero
