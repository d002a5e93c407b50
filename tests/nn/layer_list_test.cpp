// LayerList: order, hooks around each layer, validation on add, parameter-name collection.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "nn/layer_list.h"
#include "util/error.h"

namespace {

using ds::nn::Layer;
using ds::nn::LayerHooks;
using ds::nn::LayerList;

// Non-commuting steps so a wrong order gives a different result: ((x * 3) + 1) * 2.
LayerList make_list(std::vector<std::string>* trace = nullptr) {
  LayerList list;
  list.add("mul3", [trace](const torch::Tensor& x) {
    if (trace) trace->push_back("run0");
    return x * 3;
  }, {"a.weight"});
  list.add(Layer{"add1", [trace](const torch::Tensor& x) {
    if (trace) trace->push_back("run1");
    return x + 1;
  }, {"b.weight", "a.weight"}});
  list.add("mul2", [trace](const torch::Tensor& x) {
    if (trace) trace->push_back("run2");
    return x * 2;
  }, {"c.weight", "c.bias"});
  return list;
}

TEST(LayerList, RunsLayersInOrder) {
  auto list = make_list();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "mul3");
  EXPECT_EQ(list.at(2).name, "mul2");
  auto y = list.forward(torch::tensor({1.0, 2.0}));
  EXPECT_TRUE(torch::equal(y, torch::tensor({8.0, 14.0})));  // ((x*3)+1)*2
}

TEST(LayerList, EmptyListIsIdentity) {
  LayerList list;
  auto x = torch::tensor({5.0});
  EXPECT_TRUE(list.empty());
  EXPECT_TRUE(torch::equal(list.forward(x), x));
}

TEST(LayerList, AtOutOfRangeNamesIndexAndSize) {
  auto list = make_list();
  try {
    list.at(7);
    FAIL() << "expected ds::Error";
  } catch (const ds::Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 layers"), std::string::npos) << e.what();
  }
}

TEST(LayerList, AddRejectsBadLayers) {
  auto list = make_list();
  auto id = [](const torch::Tensor& x) { return x; };
  EXPECT_THROW(list.add("mul3", id, {}), ds::Error);                     // duplicate name
  EXPECT_THROW(list.add("", id, {}), ds::Error);                         // empty name
  EXPECT_THROW(list.add("none", nullptr, {}), ds::Error);                // no forward
  EXPECT_THROW(list.add("twice", id, {"p.weight", "p.weight"}), ds::Error);
  EXPECT_EQ(list.size(), 3u);  // nothing was added
}

TEST(LayerList, AllParamNamesUniqueInFirstUseOrder) {
  auto list = make_list();
  const std::vector<std::string> expected = {"a.weight", "b.weight", "c.weight", "c.bias"};
  EXPECT_EQ(list.all_param_names(), expected);
}

class RecordingHooks : public LayerHooks {
 public:
  explicit RecordingHooks(std::vector<std::string>* trace) : trace_(trace) {}
  void before_forward(std::size_t i) override { trace_->push_back("before" + std::to_string(i)); }
  void after_forward(std::size_t i) override { trace_->push_back("after" + std::to_string(i)); }

 private:
  std::vector<std::string>* trace_;
};

TEST(LayerList, HooksWrapEachLayer) {
  std::vector<std::string> trace;
  auto list = make_list(&trace);
  EXPECT_EQ(list.hooks(), nullptr);
  list.set_hooks(std::make_shared<RecordingHooks>(&trace));
  list.forward(torch::tensor({1.0}));
  const std::vector<std::string> expected = {"before0", "run0", "after0", "before1", "run1",
                                             "after1",  "before2", "run2", "after2"};
  EXPECT_EQ(trace, expected);

  trace.clear();
  list.set_hooks(nullptr);
  list.forward(torch::tensor({1.0}));
  EXPECT_EQ(trace, (std::vector<std::string>{"run0", "run1", "run2"}));
}

}  // namespace
