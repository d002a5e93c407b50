#include "zero/flat_params.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace ds::zero {
namespace {

struct Net : torch::nn::Module {
  Net() {
    a = register_module("a", torch::nn::Linear(3, 5));
    b = register_module("b", torch::nn::Linear(5, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return b(torch::tanh(a(x))); }
  torch::nn::Linear a{nullptr}, b{nullptr};
};

std::vector<NamedParam> named(torch::nn::Module& m, std::function<int(const std::string&)> group = nullptr) {
  std::vector<NamedParam> out;
  for (auto& it : m.named_parameters()) out.push_back({it.key(), it.value(), group ? group(it.key()) : 0});
  return out;
}

TEST(FlatParams, ParametersBecomeViewsOfOneBufferWithValuesKept) {
  torch::manual_seed(0);
  Net net;
  auto before = net.a->weight.clone();
  auto flat = FlatParameters::build(named(net), {16});
  ASSERT_EQ(flat.groups().size(), 1u);
  const auto& g = flat.groups()[0];
  EXPECT_EQ(g.numel, 3 * 5 + 5 + 5 * 2 + 2);
  EXPECT_EQ(g.padded_numel, 32);  // padded to a multiple of 16
  EXPECT_TRUE(torch::equal(net.a->weight, before));
  // Writing the flat buffer changes the module's parameter: it is a view, not a copy.
  const ParamSlot* s = flat.find("a.weight");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->offset, 0);
  EXPECT_EQ(flat.find("a.bias")->offset, 15);
  EXPECT_EQ(flat.find("b.weight")->offset, 20);
  torch::NoGradGuard ng;
  g.params.narrow(0, 15, 5).fill_(7.0);
  EXPECT_TRUE(torch::all(net.a->bias == 7.0).item<bool>());
  // Padding stays zero.
  EXPECT_TRUE(torch::all(g.params.narrow(0, g.numel, g.padded_numel - g.numel) == 0).item<bool>());
}

TEST(FlatParams, AutogradAccumulatesIntoTheContiguousGradientBuffer) {
  torch::manual_seed(0);
  Net net, ref;
  {
    torch::NoGradGuard ng;
    for (size_t i = 0; i < net.parameters().size(); ++i) ref.parameters()[i].copy_(net.parameters()[i]);
  }
  auto flat = FlatParameters::build(named(net), {});
  auto x = torch::randn({4, 3});
  for (int k = 0; k < 2; ++k) {  // two backward passes accumulate
    net.forward(x).sum().backward();
    ref.forward(x).sum().backward();
  }
  const auto& g = flat.groups()[0];
  for (const auto& slot : g.slots) {
    auto expect = ref.named_parameters()[slot.name].grad();
    auto got = g.grads.narrow(0, slot.offset, slot.numel).view(slot.shape);
    EXPECT_TRUE(torch::allclose(got, expect)) << slot.name;
    EXPECT_EQ(slot.param.grad().data_ptr(), got.data_ptr()) << slot.name;
  }
  flat.zero_grads();
  EXPECT_EQ(flat.grad_buffer().count_nonzero().item<int64_t>(), 0);
}

TEST(FlatParams, RebindRestoresGradViewsAfterUserResetsThem) {
  Net net;
  auto flat = FlatParameters::build(named(net), {});
  net.a->weight.mutable_grad() = torch::Tensor();  // what zero_grad(set_to_none) does
  EXPECT_EQ(flat.rebind_grads(), 1);
  EXPECT_EQ(flat.rebind_grads(), 0);
  net.forward(torch::ones({1, 3})).sum().backward();
  EXPECT_GT(flat.grad_buffer().abs().sum().item<double>(), 0.0);
}

TEST(FlatParams, GroupsSplitByParamGroupAndGradRegionsAreAligned) {
  Net net;
  auto flat = FlatParameters::build(named(net, [](const std::string& n) { return n.find("bias") != std::string::npos ? 1 : 0; }), {4});
  ASSERT_EQ(flat.groups().size(), 2u);
  EXPECT_EQ(flat.groups()[0].param_group, 0);
  EXPECT_EQ(flat.groups()[1].param_group, 1);
  EXPECT_EQ(flat.groups()[1].numel, 7);
  for (const auto& g : flat.groups())
    EXPECT_EQ(reinterpret_cast<uintptr_t>(g.grads.data_ptr()) % 64, 0u);
  EXPECT_EQ(flat.numel(), 32);
}

}  // namespace
}  // namespace ds::zero
