// nn::memory_efficient_linear (zero_optimization.memory_efficient_linear): the same values and
// gradients as torch's linear, bit for bit, and a weight whose data is replaced after forward (a
// stage-3 release) no longer has its old storage kept alive by autograd; backward reads the new data.
#include "nn/memory_efficient_linear.h"

#include <gtest/gtest.h>

namespace {

struct Grads {
  torch::Tensor y, x, w, b;
};

Grads run(bool efficient, const torch::Tensor& x0, const torch::Tensor& w0, const torch::Tensor& b0) {
  auto x = x0.clone().requires_grad_();
  auto w = w0.clone().requires_grad_();
  auto b = b0.defined() ? b0.clone().requires_grad_() : torch::Tensor();
  auto y = efficient ? ds::nn::memory_efficient_linear(x, w, b) : torch::nn::functional::linear(x, w, b);
  (y * torch::linspace(-1, 1, y.numel()).view(y.sizes())).sum().backward();
  return {y.detach(), x.grad(), w.grad(), b.defined() ? b.grad() : torch::Tensor()};
}

TEST(MemoryEfficientLinear, MatchesTorchLinearBitForBit) {
  torch::manual_seed(3);
  const auto w = torch::randn({24, 40}), b = torch::randn({24});
  for (const auto& x : {torch::randn({7, 40}), torch::randn({3, 5, 40}), torch::randn({5, 3, 40}).transpose(0, 1)})
    for (bool bias : {true, false}) {
      const Grads ref = run(false, x, w, bias ? b : torch::Tensor());
      const Grads got = run(true, x, w, bias ? b : torch::Tensor());
      SCOPED_TRACE(testing::Message() << "input " << x.sizes() << (x.is_contiguous() ? "" : " (strided)")
                                      << (bias ? " with" : " without") << " bias");
      EXPECT_TRUE(torch::equal(got.y, ref.y));
      EXPECT_TRUE(torch::equal(got.x, ref.x));
      EXPECT_TRUE(torch::equal(got.w, ref.w));
      if (bias) {
        EXPECT_TRUE(torch::equal(got.b, ref.b));
      }
    }
}

// Forward with one storage behind the weight, then the weight's data replaced (released, then
// re-gathered as a new tensor with the same values): autograd must not keep the first storage.
bool first_storage_survives(bool efficient, torch::Tensor* weight_grad) {
  auto x = torch::randn({4, 8}).requires_grad_();
  auto w = torch::zeros({6, 8}).requires_grad_();
  torch::Tensor gathered = torch::randn({6, 8});
  {
    torch::NoGradGuard no_grad;
    w.set_data(gathered);
  }
  const c10::weak_intrusive_ptr<c10::StorageImpl> first(gathered.storage().getWeakStorageImpl());
  auto y = efficient ? ds::nn::memory_efficient_linear(x, w) : torch::nn::functional::linear(x, w);
  torch::Tensor regathered = gathered.clone();
  {
    torch::NoGradGuard no_grad;
    w.set_data(torch::full({1}, std::nanf("")).expand({6, 8}));  // released
  }
  gathered.reset();
  const bool survives = !first.expired();
  {
    torch::NoGradGuard no_grad;
    w.set_data(regathered);  // gathered again before backward
  }
  y.sum().backward();
  *weight_grad = w.grad();
  return survives;
}

TEST(MemoryEfficientLinear, AReleasedWeightIsFreedAndBackwardReadsTheRegatheredOne) {
  torch::Tensor g_torch, g_ours;
  EXPECT_TRUE(first_storage_survives(false, &g_torch)) << "torch's linear saves a view of the weight (this test's premise)";
  EXPECT_FALSE(first_storage_survives(true, &g_ours)) << "the forward's copy of the weight is freed at release";
  EXPECT_FALSE(torch::isnan(g_ours).any().item<bool>());
}

TEST(MemoryEfficientLinear, InputGradientUsesTheWeightAsItIsAtBackward) {
  auto x = torch::randn({2, 3}).requires_grad_();
  auto w = torch::randn({4, 3}).requires_grad_();
  auto y = ds::nn::memory_efficient_linear(x, w);
  auto w_new = torch::randn({4, 3});
  {
    torch::NoGradGuard no_grad;
    w.set_data(w_new);  // the values a stage-3 backward gather brings
  }
  y.sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), torch::ones({2, 4}).mm(w_new)));
}

}  // namespace
