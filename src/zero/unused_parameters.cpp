#include "zero/unused_parameters.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "util/error.h"

namespace ds::zero {

UnusedParameterCheck::UnusedParameterCheck(std::vector<std::string> names, const std::vector<torch::Tensor>& params)
    : names_(std::move(names)), used_(params.size(), 0) {
  DS_ASSERT(names_.size() == params.size(), "one name per parameter");
  for (size_t k = 0; k < params.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params[k]);
    DS_ASSERT(acc != nullptr, "a trainable leaf parameter has a gradient accumulator");
    // Its input is the gradient autograd delivers; an undefined one (a path that produced none) is no use.
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list& inputs) {
          if (!inputs.empty() && inputs[0].defined()) used_[k] = 1;
          return outputs;
        })));
    accumulators_.push_back(std::move(acc));
  }
}

UnusedParameterCheck::~UnusedParameterCheck() {
  for (size_t k = 0; k < accumulators_.size(); ++k) accumulators_[k]->del_post_hook(hook_keys_[k]);
}

void UnusedParameterCheck::verify(comm::Communicator& comm) {
  std::vector<int32_t> used = used_;
  std::fill(used_.begin(), used_.end(), 0);
  if (used.empty()) return;
  if (comm.size() > 1) comm.all_reduce(comm::Buffer(used.data(), static_cast<int64_t>(used.size())), comm::ReduceOp::Sum,
                                       "unused_parameters");
  std::vector<std::string> missed;
  for (size_t k = 0; k < used.size(); ++k)
    if (used[k] < comm.size()) missed.push_back(fmt::format("{} (on {} of {} ranks)", names_[k], comm.size() - used[k], comm.size()));
  if (missed.empty()) return;
  constexpr size_t kListed = 8;
  const size_t more = missed.size() > kListed ? missed.size() - kListed : 0;
  if (more > 0) missed.resize(kListed);
  throw ConfigError(
      "zero_optimization.ignore_unused_parameters",
      fmt::format("false, and {} trainable parameter{} got no gradient in this step, so took no part in the loss: "
                  "{}{}. Make every trainable parameter contribute to the loss, freeze the unused ones "
                  "(requires_grad false) before ds::initialize, or set ignore_unused_parameters true (the default: "
                  "an unused parameter is stepped with a zero gradient). No parameter was updated by this step",
                  missed.size() + more, missed.size() + more == 1 ? "" : "s", fmt::join(missed, ", "),
                  more > 0 ? fmt::format(" and {} more", more) : ""));
}

}  // namespace ds::zero
