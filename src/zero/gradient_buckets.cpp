#include "zero/gradient_buckets.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <functional>

#include "util/error.h"

namespace ds::zero {

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> params, int64_t bucket_numel, torch::ScalarType round_to,
                                 torch::ScalarType wire, bool overlap, ReduceFn reduce,
                                 std::function<void(size_t)> on_taken)
    : params_(std::move(params)), round_to_(round_to), wire_(wire), overlap_(overlap), reduce_(std::move(reduce)),
      on_taken_(std::move(on_taken)) {
  bucket_numel = std::max<int64_t>(1, bucket_numel);
  where_.resize(params_.size());
  for (size_t k = params_.size(); k-- > 0;) {
    const int64_t n = params_[k].numel();
    if (buckets_.empty() || (buckets_.back().numel > 0 && buckets_.back().numel + n > bucket_numel))
      buckets_.emplace_back();
    Bucket& b = buckets_.back();
    where_[k] = {buckets_.size() - 1, b.entries.size()};
    b.entries.push_back({k, b.numel, n});
    b.numel += n;
  }
  packed_.resize(buckets_.size());
  pending_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].entries.size();
  // The accumulator is created now, while the parameter has its full shape (stage 3 releases the
  // data later; autograd checks gradients against the shape recorded here). The variable holds it
  // weakly, so we keep it alive.
  for (size_t k = 0; k < params_.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[k]);
    DS_ASSERT(acc != nullptr, "a trainable leaf parameter has a gradient accumulator");
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_gradient(k);
          return outputs;
        })));
    accumulators_.push_back(std::move(acc));
  }
}

GradientBuckets::~GradientBuckets() {
  try {
    drain(0);  // collectives in flight reference our buffers
  } catch (...) {  // destructors never throw; the communicator has reported the failure
  }
  for (size_t k = 0; k < accumulators_.size(); ++k) accumulators_[k]->del_post_hook(hook_keys_[k]);
}

int64_t GradientBuckets::max_bucket_numel() const {
  int64_t m = 0;
  for (const auto& b : buckets_) m = std::max(m, b.numel);
  return m;
}

int64_t GradientBuckets::live_numel_bound() const {
  std::vector<int64_t> sizes;
  for (const auto& b : buckets_) sizes.push_back(b.numel);
  return largest_buckets_numel(sizes, max_live_buckets());
}

int64_t largest_buckets_numel(std::vector<int64_t> sizes, size_t count) {
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  int64_t n = 0;
  for (size_t i = 0; i < sizes.size() && i < count; ++i) n += sizes[i];
  return n;
}

void GradientBuckets::on_gradient(size_t k) {
  torch::NoGradGuard no_grad;
  auto [b, e] = where_[k];
  const BucketEntry& entry = buckets_[b].entries[e];
  torch::Tensor& grad = params_[k].mutable_grad();
  if (!grad.defined()) return;
  if (!packed_[b].defined()) packed_[b] = torch::zeros({buckets_[b].numel}, grad.options().dtype(wire_));
  auto dst = packed_[b].narrow(0, entry.offset, entry.numel);
  auto src = grad.reshape({-1});
  dst.add_(src.to(round_to_).to(wire_));  // add: an unused-then-used parameter still sums right
  grad = torch::Tensor();  // the full gradient is not kept
  if (on_taken_) on_taken_(k);
  DS_ASSERT(pending_[b] > 0, "a gradient arrived twice in one backward pass");
  pending_[b] -= 1;
  launch_ready();
}

void GradientBuckets::launch_ready() {
  while (next_ < buckets_.size() && pending_[next_] == 0) {
    if (!packed_[next_].defined())
      packed_[next_] = torch::zeros({buckets_[next_].numel}, torch::TensorOptions().dtype(wire_));
    if (overlap_) drain(kMaxInFlight - 1);
    in_flight_.push_back(reduce_(next_, buckets_[next_], std::move(packed_[next_])));
    packed_[next_] = torch::Tensor();
    ++next_;
    if (!overlap_) drain(0);
  }
}

void GradientBuckets::drain(size_t keep) {
  while (in_flight_.size() > keep) {
    Finisher f = std::move(in_flight_.front());
    in_flight_.erase(in_flight_.begin());
    if (f) f();
  }
}

void GradientBuckets::finish() {
  for (size_t b = next_; b < buckets_.size(); ++b) pending_[b] = 0;  // missing gradients are zeros
  launch_ready();
  drain(0);
  next_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].entries.size();
}

}  // namespace ds::zero
