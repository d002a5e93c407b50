// ParamCoordinator (stage 3's LayerList hooks) over ShardedParameters on the run's data-parallel
// group (one rank alone, two under mpirun -np 2): each layer's parameters are gathered exactly
// while it runs and released after, persistent ones stay, backward gathers again, and the next
// layer is prefetched only within stage3_prefetch_bucket_size and stage3_max_live_parameters.
#include "zero/param_coordinator.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "../log_capture.h"
#include "zero/gradient_buckets.h"
#include "zero_test_env.h"

namespace ds::zero {
namespace {

using test::dp;

// Three layers: l0 = x · w0, l1 = x · w1 + sum(b1), l2 = x · w2 (w* have 6 elements, b1 2).
// Parameter ids: w0 0, w1 1, b1 2, w2 3. With stage3_param_persistence_threshold 2 only b1 persists.
torch::Tensor init(int64_t n, float base, int rank) {
  return torch::arange(n, torch::kFloat32) * 0.5f + base + 100.0f * float(rank);  // rank 0's values win
}

struct Fixture {
  std::vector<NamedParam> params;
  std::vector<torch::Tensor> rank0;  // plain copies of the values every rank trains with
  ZeroConfig zero;
  MemoryLedger ledger;
  std::unique_ptr<ShardedParameters> sp;
  nn::LayerList layers;
  std::shared_ptr<ParamCoordinator> coord;
  std::vector<std::vector<bool>> seen;  // per layer run: sp[id].gathered for every id

  explicit Fixture(ZeroConfig z) : zero(z) {
    const int r = dp().rank();
    const std::vector<std::pair<const char*, std::pair<int64_t, float>>> spec = {
        {"w0", {6, 1.0f}}, {"w1", {6, 2.0f}}, {"b1", {2, 0.25f}}, {"w2", {6, 3.0f}}};
    for (const auto& [name, s] : spec) {
      params.push_back({name, init(s.first, s.second, r).requires_grad_(), 0});
      rank0.push_back(init(s.first, s.second, 0));
    }
    zero.stage = 3;
    zero.param_persistence_threshold = 2;
    sp = std::make_unique<ShardedParameters>(dp(), DtypePlan{}, zero, params, ledger, Tier::Device);
    auto p = [this](size_t id) { return params[id].param; };
    layers.add("l0", [=, this](const torch::Tensor& x) { snapshot(); return x * p(0); }, {"w0"});
    layers.add("l1", [=, this](const torch::Tensor& x) { snapshot(); return x * p(1) + p(2).sum(); }, {"w1", "b1"});
    layers.add("l2", [=, this](const torch::Tensor& x) { snapshot(); return x * p(3); }, {"w2"});
    coord = std::make_shared<ParamCoordinator>(*sp, layers, zero);
    layers.set_hooks(coord);
  }
  void snapshot() {
    std::vector<bool> g;
    for (size_t id = 0; id < sp->size(); ++id) g.push_back((*sp)[id].gathered);
    seen.push_back(g);
  }
  std::vector<bool> gathered() const {
    std::vector<bool> g;
    for (size_t id = 0; id < sp->size(); ++id) g.push_back((*sp)[id].gathered);
    return g;
  }
  // True when `ids` are being gathered in the background (a prefetch): a gather of them starts
  // nothing then. Otherwise the gather it started is completed and undone.
  bool prefetched(const std::vector<size_t>& ids) {
    for (size_t id : ids) EXPECT_FALSE((*sp)[id].gathered);
    auto pending = sp->gather_async(ids);
    const bool was = pending->ids.empty();
    sp->finish(std::move(pending));
    if (!was)
      for (size_t id : ids) sp->release(id);
    return was;
  }
};

torch::Tensor input() { return torch::arange(6, torch::kFloat32) - 2.0f; }

TEST(ParamCoordinator, GathersEachLayerWhileItRunsAndReleasesItAfter) {
  Fixture f(ZeroConfig{});
  EXPECT_EQ(f.coord->layer_params(1), (std::vector<size_t>{1, 2}));
  EXPECT_TRUE(f.coord->unlisted().empty());
  auto out = f.layers.forward(input());
  // Inside layer i: its parameters and the persistent b1, nothing else (the next layer is at most
  // in flight, the previous one released).
  using G = std::vector<bool>;
  ASSERT_EQ(f.seen.size(), 3u);
  EXPECT_EQ(f.seen[0], (G{true, false, true, false}));
  EXPECT_EQ(f.seen[1], (G{false, true, true, false}));
  EXPECT_EQ(f.seen[2], (G{false, false, true, true}));
  EXPECT_EQ(f.gathered(), (G{false, false, true, false})) << "all released after the forward";
  EXPECT_EQ(f.sp->live_numel(), 0);
  EXPECT_EQ(f.sp->peak_live_numel(), 6) << "one 6-element layer at a time";

  // The same computation on plain tensors holding rank 0's values.
  std::vector<torch::Tensor> ref;
  for (const auto& t : f.rank0) ref.push_back(t.clone().requires_grad_());
  auto ref_out = ((input() * ref[0]) * ref[1] + ref[2].sum()) * ref[3];
  EXPECT_TRUE(torch::equal(out, ref_out)) << out << " vs " << ref_out;

  // Backward gathers each layer again before autograd needs its values.
  out.sum().backward();
  ref_out.sum().backward();
  for (size_t id = 0; id < 4; ++id)
    EXPECT_TRUE(torch::equal(f.params[id].param.grad(), ref[id].grad())) << f.params[id].name << ": "
                                                                        << f.params[id].param.grad();
  EXPECT_EQ(f.gathered(), (G{true, true, true, true})) << "gathered for backward, nothing took the gradients";
  f.coord->end_pass();
  EXPECT_EQ(f.gathered(), (G{false, false, true, false}));
  EXPECT_EQ(f.sp->live_numel(), 0);
}

TEST(ParamCoordinator, ParametersAreReleasedAsSoonAsTheirGradientIsTaken) {
  Fixture f(ZeroConfig{});
  std::vector<torch::Tensor> tensors;
  for (const auto& np : f.params) tensors.push_back(np.param);
  std::vector<torch::Tensor> grads(4);
  GradientBuckets buckets(
      tensors, 1, torch::kFloat32, torch::kFloat32, false,
      [&](size_t, const Bucket& b, torch::Tensor packed) -> GradientBuckets::Finisher {
        grads[b.entries[0].param] = packed;
        return {};
      },
      [&](size_t id) { f.coord->param_done(id); });
  f.layers.forward(input()).sum().backward();
  buckets.finish();
  EXPECT_EQ(f.gathered(), (std::vector<bool>{false, false, true, false})) << "released by param_done, before end_pass";
  EXPECT_EQ(f.sp->live_numel(), 0);
  // d(sum(((x·w0)·w1 + sum(b1))·w2))/dw0 = x·w1·w2, with rank 0's values.
  EXPECT_TRUE(torch::equal(grads[0], input() * f.rank0[1] * f.rank0[3])) << grads[0];
  f.coord->end_pass();
}

TEST(ParamCoordinator, PrefetchesTheNextLayerWithinBucketSizeAndMaxLive) {
  // After before_forward(0) six elements are live (w0); the next layer needs six more (w1; b1 is
  // persistent). Prefetch happens iff 6 <= prefetch_bucket_size and 6 + 6 <= max_live_parameters.
  struct Case {
    int64_t bucket, max_live;
    bool prefetch;
  };
  for (const Case& c : {Case{50000000, 1000000000, true}, Case{6, 12, true}, Case{5, 12, false}, Case{6, 11, false}}) {
    ZeroConfig z;
    z.prefetch_bucket_size = c.bucket;
    z.max_live_parameters = c.max_live;
    Fixture f(z);
    f.coord->before_forward(0);
    EXPECT_EQ(f.sp->live_numel(), 6);
    EXPECT_EQ(f.prefetched({1}), c.prefetch) << "prefetch_bucket_size " << c.bucket << ", max_live " << c.max_live;
    f.coord->after_forward(0);
    f.coord->end_pass();
    EXPECT_EQ(f.sp->live_numel(), 0);
  }
}

// stage3_max_reuse_distance: once the first pass has recorded the trace (l0 l1 l2 forward, l2 l1 l0
// backward; layers of 6, 8 and 6 elements), a later pass keeps a layer gathered after its forward
// when the trace fetches it again before `distance` elements have been fetched from there on.
TEST(ParamCoordinator, KeepsWhatTheTraceReusesWithinMaxReuseDistance) {
  using G = std::vector<bool>;
  struct Case {
    int64_t distance;
    G after_forward;  // gathered once the second forward has finished (b1 persists)
  };
  // After l2 its own backward comes next (distance > 0 keeps w2). From l1: l2 (6) and l2's backward
  // (6) pass before l1's backward: 12 < 13 keeps w1. From l0: 8 + 6 + 6 + 8 = 28 before l0's backward.
  for (const Case& c : {Case{0, G{false, false, true, false}}, Case{1, G{false, false, true, true}},
                        Case{12, G{false, false, true, true}}, Case{13, G{false, true, true, true}},
                        Case{28, G{false, true, true, true}}, Case{29, G{true, true, true, true}},
                        Case{1000000000, G{true, true, true, true}}}) {
    ZeroConfig z;
    z.max_reuse_distance = c.distance;
    Fixture f(z);
    auto first = f.layers.forward(input());
    EXPECT_EQ(f.gathered(), (G{false, false, true, false})) << "no trace yet: everything released";
    first.sum().backward();
    f.coord->end_pass();
    const auto first_grads = f.params[0].param.grad().clone();
    for (auto& np : f.params) np.param.mutable_grad().reset();

    auto second = f.layers.forward(input());
    EXPECT_EQ(f.gathered(), c.after_forward) << "stage3_max_reuse_distance " << c.distance;
    second.sum().backward();
    EXPECT_TRUE(torch::equal(f.params[0].param.grad(), first_grads)) << "kept or gathered again: the same values";
    f.coord->end_pass();
    EXPECT_EQ(f.gathered(), (G{false, false, true, false})) << "at rest everything is released";
    EXPECT_EQ(f.sp->live_numel(), 0);
    {
      torch::NoGradGuard no_grad;  // evaluation: no backward follows, nothing is kept
      f.layers.forward(input());
    }
    EXPECT_EQ(f.gathered(), (G{false, false, true, false})) << "a no-grad forward keeps nothing";
  }
}

// A pass that fetches the layers in another order than the first (here: the list run twice before
// one backward) is warned once; with stage3 log_trace_cache_warnings (DeepSpeed's trace-cache
// invalidation warnings) every time.
TEST(ParamCoordinator, WarnsWhenTheOrderLeavesTheTrace) {
  for (bool every_time : {false, true}) {
    ZeroConfig z;
    z.log_trace_cache_warnings = every_time;
    Fixture f(z);
    ds::test::LogCapture log;
    auto pass = [&](bool twice) {
      auto out = f.layers.forward(input());
      if (twice) out = f.layers.forward(out);
      out.sum().backward();
      f.coord->end_pass();
      for (auto& np : f.params) np.param.mutable_grad().reset();
    };
    pass(false);  // the trace
    pass(false);
    EXPECT_EQ(log.count("different order"), 0);
    pass(true);
    pass(true);
    pass(false);
    EXPECT_EQ(log.count("different order"), every_time ? 2 : 1) << "log_trace_cache_warnings " << every_time;
  }
}

TEST(ParamCoordinator, ParametersInNoLayerStayGathered) {
  Fixture f(ZeroConfig{});
  // A second coordinator over a list that names only w0: w1 and w2 are unlisted (b1 persists anyway)
  // and are gathered and held for good.
  nn::LayerList partial;
  partial.add("l0", [&](const torch::Tensor& x) { return x * f.params[0].param; }, {"w0"});
  ParamCoordinator c(*f.sp, partial, f.zero);
  EXPECT_EQ(c.unlisted(), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(f.gathered(), (std::vector<bool>{false, true, true, true}));
  f.sp->release(1);
  EXPECT_TRUE(torch::equal(f.params[1].param, f.rank0[1])) << "held";
}

}  // namespace
}  // namespace ds::zero
