// The 1-bit family (optim/onebit_adam.h, zero_one_adam.h, onebit_lamb.h) against an independent Python
// re-derivation of DeepSpeed's optimizers (tests/optim/onebit_reference.py, torch ops, every rank
// simulated in one process, the compressed all-reduce included). Runs under mpirun in
// distributed_tests: at world 1 (no exchange, as DeepSpeed), 2 and 4. Two parameter groups with their
// own lr and weight decay, group padding, every phase: the set-up step, warm-up, the compressed steps,
// and 0/1 Adam's variance schedule and local steps.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "comm/comm.h"
#include "optim/compressed_optimizer.h"

namespace ds::optim {
namespace {

namespace fs = std::filesystem;

struct GroupSpec {
  std::vector<int64_t> sizes;
  int64_t padded;
  double lr, weight_decay;
};

const std::vector<GroupSpec> kGroups = {{{37, 64, 5}, 112, 1e-2, 0.01}, {{20}, 24, 5e-3, 0.0}};
constexpr int kSteps = 16;

int64_t flat_numel() {
  int64_t n = 0;
  for (const auto& g : kGroups) n += g.padded;
  return n;
}

OptimizerConfig config_for(OptimizerType type) {
  OptimizerConfig c;
  c.type = type;
  c.params.freeze_step = 5;  // compressed steps 6 .. 16
  c.params.var_freeze_step = 9;
  c.params.var_update_scaler = 2;  // var_interval 1, 1, 2, 2, 4 ...
  c.params.local_step_scaler = 3;
  c.params.local_step_clipper = 4;
  c.params.max_coeff = 0.8;  // the trust ratio's clamp is live
  return c;
}

nlohmann::json case_json(const OptimizerConfig& c, int world) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : kGroups)
    groups.push_back({{"sizes", g.sizes}, {"padded", g.padded}, {"lr", g.lr}, {"weight_decay", g.weight_decay}});
  const auto& p = c.params;
  return {{"type", to_string(c.type)}, {"world", world}, {"steps", kSteps}, {"groups", groups},
          {"betas", {p.betas[0], p.betas[1]}}, {"eps", p.eps}, {"freeze_step", p.freeze_step},
          {"var_freeze_step", p.var_freeze_step}, {"var_update_scaler", p.var_update_scaler},
          {"local_step_scaler", p.local_step_scaler}, {"local_step_clipper", p.local_step_clipper},
          {"max_coeff", p.max_coeff}, {"min_coeff", p.min_coeff}, {"coeff_beta", p.coeff_beta},
          {"factor_max", p.factor_max}, {"factor_min", p.factor_min}, {"factor_threshold", p.factor_threshold}};
}

// Every rank generates every rank's data (same seed), so the mean gradient needs no collective.
struct Data {
  std::vector<float> params;                   // [flat]
  std::vector<std::vector<std::vector<float>>> grads;  // [step][rank][flat], zero in the padding
};

// Elements of the second group (lr 5e-3, no weight decay) whose gradient is always zero, as an
// embedding row of a token never seen: [112, 120) of the flat layout.
constexpr int64_t kDeadBegin = 112, kDeadEnd = 120;

Data make_data(int world, bool dead) {
  std::mt19937 gen(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Data d;
  const int64_t flat = flat_numel();
  d.params.assign(size_t(flat), 0.0f);
  auto fill_real = [&](std::vector<float>& v, float scale) {
    int64_t base = 0;
    for (const auto& g : kGroups) {
      int64_t off = 0;
      for (int64_t n : g.sizes) {
        for (int64_t i = 0; i < n; ++i) v[size_t(base + off + i)] = scale * normal(gen);
        off += n;
      }
      base += g.padded;
    }
  };
  fill_real(d.params, 0.5f);
  d.grads.assign(kSteps, std::vector<std::vector<float>>(size_t(world), std::vector<float>(size_t(flat), 0.0f)));
  for (int s = 0; s < kSteps; ++s)
    for (int r = 0; r < world; ++r) {
      fill_real(d.grads[size_t(s)][size_t(r)], 0.1f);
      if (dead) std::fill(d.grads[size_t(s)][size_t(r)].begin() + kDeadBegin, d.grads[size_t(s)][size_t(r)].begin() + kDeadEnd, 0.0f);
    }
  return d;
}

void write_f32(const fs::path& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
}

// Runs `type` over the case on this rank; returns its final parameters, exp_avg, exp_avg_sq.
struct OptRun {
  std::vector<float> p, m, v;
  std::vector<bool> reduced;
  std::string phase;
};

OptRun run_ours(OptimizerType type, comm::Communicator& comm, const Data& data) {
  const int world = comm.size(), rank = comm.rank();
  const int64_t flat = flat_numel();
  std::vector<std::vector<ParamSpan>> spans;
  for (const auto& g : kGroups) {
    spans.emplace_back();
    int64_t off = 0;
    for (int64_t n : g.sizes) {
      spans.back().push_back({off, n});
      off += n;
    }
  }
  auto opt = make_compressed_optimizer(config_for(type), comm, spans);
  const size_t n = static_cast<size_t>(flat);
  OptRun run;
  run.p = data.params;
  run.m.assign(n, 0.0f);
  run.v.assign(n, 0.0f);
  std::vector<float> fresh(n, 0.0f), g(n, 0.0f);
  for (int s = 0; s < kSteps; ++s) {
    run.reduced.push_back(opt->wants_reduced_gradients());
    if (run.reduced.back()) {  // the engine's all-reduce: the mean over ranks, summed in rank order
      g = data.grads[size_t(s)][0];
      for (int r = 1; r < world; ++r)
        for (int64_t i = 0; i < flat; ++i) g[size_t(i)] += data.grads[size_t(s)][size_t(r)][size_t(i)];
      for (auto& x : g) x /= float(world);
    } else {
      g = data.grads[size_t(s)][size_t(rank)];
    }
    std::vector<CompressedGroup> views;
    int64_t base = 0;
    for (const auto& spec : kGroups) {
      CompressedGroup cg;
      cg.param = run.p.data() + base;
      cg.grad = g.data() + base;
      cg.exp_avg = run.m.data() + base;
      cg.exp_avg_sq = run.v.data() + base;
      cg.exp_avg_sq_fresh = fresh.data() + base;
      cg.numel = spec.padded;
      cg.lr = spec.lr;
      cg.weight_decay = spec.weight_decay;
      views.push_back(cg);
      base += spec.padded;
    }
    opt->step(views);
  }
  EXPECT_EQ(opt->steps(), kSteps);
  run.phase = opt->phase();
  return run;
}

void run_case(OptimizerType type) {
  auto comm = comm::make_communicator(comm::Backend::Auto);
  const int world = comm->size(), rank = comm->rank();
  const OptimizerConfig cfg = config_for(type);
  const Data data = make_data(world, false);
  const int64_t flat = flat_numel();
  const fs::path dir = fs::path(DS_BINARY_DIR) / fmt::format("onebit_reference_{}_w{}", to_string(type), world);
  if (rank == 0) {  // the reference, once per case
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "case.json") << case_json(cfg, world).dump(2);
    write_f32(dir / "params.f32", data.params);
    std::vector<float> grads;
    for (const auto& step : data.grads)
      for (const auto& r : step) grads.insert(grads.end(), r.begin(), r.end());
    write_f32(dir / "grads.f32", grads);
    const std::string cmd = fmt::format("/usr/bin/python3 {}/tests/optim/onebit_reference.py {}", DS_SOURCE_DIR, dir.string());
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;  // no ASSERT: the other ranks wait at the barrier
  }
  comm->barrier();

  const OptRun run = run_ours(type, *comm, data);
  EXPECT_EQ(run.phase, type == OptimizerType::ZeroOneAdam ? "local steps" : "compressed") << "the case reaches it";
  const std::vector<bool>& reduced = run.reduced;
  const std::vector<float>&p = run.p, &m = run.m, &v = run.v;

  std::vector<float> expected(static_cast<size_t>(world * 3 * flat));
  std::ifstream(dir / "expected.f32", std::ios::binary)
      .read(reinterpret_cast<char*>(expected.data()), std::streamsize(expected.size() * sizeof(float)));
  const auto ref_reduced = nlohmann::json::parse(std::ifstream(dir / "reduced.json")).get<std::vector<bool>>();
  EXPECT_EQ(reduced, ref_reduced) << "when the engine all-reduces";
  const std::vector<float>* ours[] = {&p, &m, &v};
  const char* names[] = {"params", "exp_avg", "exp_avg_sq"};
  for (int k = 0; k < 3; ++k) {
    // Relative to the array's scale: a moment near zero is compared at the scale of its neighbours.
    const float* want = expected.data() + (rank * 3 + k) * flat;
    double scale = 0, worst = 0;
    int64_t worst_at = 0;
    for (int64_t i = 0; i < flat; ++i) scale = std::max(scale, double(std::abs(want[i])));
    for (int64_t i = 0; i < flat; ++i) {
      const double d = std::abs((*ours[k])[size_t(i)] - want[i]) / std::max(1e-2 * scale, double(std::abs(want[i])));
      if (d > worst) worst = d, worst_at = i;
    }
    EXPECT_LT(worst, 2e-5) << to_string(type) << " " << names[k] << " rank " << rank << " element " << worst_at;
  }
  for (int64_t i = 106; i < 112; ++i) EXPECT_EQ(p[size_t(i)], 0.0f) << "padding stays zero";
  comm->barrier();
}

// No variance, no step: elements whose gradient was always zero keep their momentum at zero through
// the compressed exchanges (DeepSpeed would move them by noise / eps) and, without weight decay, do
// not move at all; everything stays finite.
TEST(OneBitReference, ElementsWithoutGradientsStayPut) {
  auto comm = comm::make_communicator(comm::Backend::Auto);
  const Data data = make_data(comm->size(), true);
  for (OptimizerType type : {OptimizerType::OneBitAdam, OptimizerType::ZeroOneAdam, OptimizerType::OneBitLamb}) {
    const OptRun run = run_ours(type, *comm, data);
    for (int64_t i = kDeadBegin; i < kDeadEnd; ++i) {
      EXPECT_EQ(run.p[size_t(i)], data.params[size_t(i)]) << to_string(type) << " element " << i;
      EXPECT_EQ(run.m[size_t(i)], 0.0f) << to_string(type) << " element " << i;
    }
    EXPECT_EQ(std::count_if(run.p.begin(), run.p.end(), [](float x) { return !std::isfinite(x); }), 0) << to_string(type);
  }
}

// A parameter kept apart (optim::ParamSpan::apart: a pipeline's tied parameter) gets from OneBitLamb the
// same update whatever parameters its optimizer holds beside it, as the copies of a tied parameter on
// two pipeline stages must. `sizes`: the parameters per group; the one at (group 0, `at`) is shared:
// its values and gradients are the same in every call (its gradients differ per rank), the others'
// come from `seed`. Returns the shared parameter after kSteps (freeze_step 5).
std::vector<float> shared_after(comm::Communicator& comm, const std::vector<std::vector<int64_t>>& sizes, size_t at,
                                bool apart, unsigned seed) {
  std::vector<std::vector<ParamSpan>> spans(sizes.size());
  std::vector<std::vector<float>> p(sizes.size()), m(sizes.size()), v(sizes.size()), fresh(sizes.size()),
      g(sizes.size());
  for (size_t gi = 0; gi < sizes.size(); ++gi) {
    int64_t off = 0;
    for (size_t k = 0; k < sizes[gi].size(); ++k) {
      spans[gi].push_back({off, sizes[gi][k], apart && gi == 0 && k == at});
      off += sizes[gi][k];
    }
    for (auto* x : {&p[gi], &m[gi], &v[gi], &fresh[gi], &g[gi]}) x->assign(size_t(off), 0.0f);
  }
  auto opt = make_compressed_optimizer(config_for(OptimizerType::OneBitLamb), comm, spans);
  std::mt19937 shared_gen(99), other_gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<std::vector<float>>& x, float scale) {
    for (size_t gi = 0; gi < sizes.size(); ++gi)
      for (size_t k = 0; k < sizes[gi].size(); ++k)
        for (int64_t i = 0; i < spans[gi][k].numel; ++i)
          x[gi][size_t(spans[gi][k].offset + i)] = scale * normal(gi == 0 && k == at ? shared_gen : other_gen);
  };
  fill(p, 0.5f);  // the same on every rank: replicas
  shared_gen.seed(7 + unsigned(comm.rank()));
  other_gen.seed(seed + 1000 * unsigned(comm.rank()));
  for (int s = 0; s < kSteps; ++s) {
    fill(g, 0.1f);
    std::vector<CompressedGroup> views;
    for (size_t gi = 0; gi < sizes.size(); ++gi) {
      if (opt->wants_reduced_gradients()) {  // the engine's all-reduce
        comm.all_reduce(comm::Buffer(g[gi].data(), int64_t(g[gi].size())));
        for (float& x : g[gi]) x /= float(comm.size());
      }
      views.push_back({p[gi].data(), g[gi].data(), m[gi].data(), v[gi].data(), fresh[gi].data(), nullptr,
                       int64_t(p[gi].size()), 1e-2, 0.01, 0.9, 0.999, 1e-8});
    }
    opt->step(views);
  }
  EXPECT_EQ(opt->phase(), "compressed");
  const ParamSpan& shared = spans[0][at];
  return {p[0].begin() + shared.offset, p[0].begin() + shared.offset + shared.numel};
}

TEST(OneBitReference, OneBitLambKeptApartGetsTheSameUpdateWhateverItsNeighbours) {
  auto comm = comm::make_communicator(comm::Backend::Auto);
  constexpr int64_t kShared = 40;
  const std::vector<std::vector<int64_t>> first{{kShared, 30}}, last{{50, kShared}, {20}};
  const std::vector<float> a = shared_after(*comm, first, 0, true, 1), b = shared_after(*comm, last, 1, true, 2);
  EXPECT_EQ(a, b) << "the copies of a parameter kept apart";
  if (comm->size() > 1) {
    // joined, its exchange and scale depend on its neighbours (DeepSpeed's way)
    EXPECT_NE(shared_after(*comm, first, 0, false, 1), shared_after(*comm, last, 1, false, 2));
  }
}

TEST(OneBitReference, OneBitAdamMatchesDeepSpeedsAlgorithm) { run_case(OptimizerType::OneBitAdam); }
TEST(OneBitReference, ZeroOneAdamMatchesDeepSpeedsAlgorithm) { run_case(OptimizerType::ZeroOneAdam); }
TEST(OneBitReference, OneBitLambMatchesDeepSpeedsAlgorithm) { run_case(OptimizerType::OneBitLamb); }

}  // namespace
}  // namespace ds::optim
