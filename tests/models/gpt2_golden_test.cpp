// Golden test: the tiny GPT-2's logits, loss and every parameter gradient against an independent
// Python PyTorch implementation (tests/models/gpt2_reference.py, Debian's python3-torch).
// Tolerance, per tensor: max|ours − ref| ≤ 1e-5 · max(max|ref|, 1e-6) (float32 both sides).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/gpt2.h"

namespace {

namespace fs = std::filesystem;
using ds::models::GPT2;
using ds::models::GPT2Config;

constexpr const char* kPython = "/usr/bin/python3";
constexpr double kRelTol = 1e-5;

// Raw little-endian values (the hosts we support are little-endian).
void write_raw(const fs::path& path, const torch::Tensor& t) {
  auto c = t.detach().contiguous().cpu();
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

torch::Tensor read_f32(const fs::path& path, torch::IntArrayRef shape) {
  auto t = torch::empty(shape, torch::kFloat);
  std::ifstream f(path, std::ios::binary);
  f.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  if (!f.good()) ADD_FAILURE() << "cannot read " << t.nbytes() << " bytes from " << path;
  return t;
}

// gpt2_reference.py exits with this code when it cannot import torch or numpy.
constexpr int kExitNoTorch = 77;

// Returns err / tolerance (≤ 1 passes) so the test can report its margin.
double expect_close(const std::string& what, const torch::Tensor& ours, const torch::Tensor& ref) {
  EXPECT_EQ(ours.sizes(), ref.sizes()) << what;
  if (ours.sizes() != ref.sizes()) return INFINITY;
  const double scale = std::max(ref.abs().max().item<double>(), 1e-6);
  const double err = (ours.to(torch::kFloat) - ref).abs().max().item<double>();
  EXPECT_LE(err, kRelTol * scale) << what << ": max abs diff " << err << ", max |ref| " << scale;
  return err / (kRelTol * scale);
}

class ThreadsGuard {
 public:
  explicit ThreadsGuard(int n) : saved_(torch::get_num_threads()) { torch::set_num_threads(n); }
  ~ThreadsGuard() { torch::set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(GPT2Golden, LogitsLossAndGradientsMatchPyTorch) {
  if (!fs::exists(kPython)) {
    GTEST_SKIP() << "golden test skipped: " << kPython << " not found (install python3-torch)";
  }
  ThreadsGuard threads(1);
  const auto t0 = std::chrono::steady_clock::now();

  const GPT2Config cfg = GPT2Config::preset("tiny");
  torch::manual_seed(1234);
  GPT2 model(cfg);
  {
    // Move off GPT-2 init (zero biases, unit LayerNorm) so every parameter's role is tested.
    torch::NoGradGuard ng;
    for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.2);
  }
  const int64_t b = 2, t = 48;  // t < n_positions: unused wpe rows must get zero gradient
  auto idx = torch::randint(cfg.vocab_size, {b, t}, torch::kLong);
  auto targets = torch::randint(cfg.vocab_size, {b, t}, torch::kLong);

  const fs::path dir = fs::temp_directory_path() /
                       ("ds_gpt2_golden_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "params");
  {
    std::ofstream m(dir / "manifest.txt");
    m << "config " << cfg.vocab_size << ' ' << cfg.n_positions << ' ' << cfg.n_embd << ' '
      << cfg.n_layer << ' ' << cfg.n_head << "\ninput " << b << ' ' << t << '\n';
    for (const auto& item : model->named_parameters()) {
      m << "param " << item.key();
      for (auto s : item.value().sizes()) m << ' ' << s;
      m << '\n';
      write_raw(dir / "params" / (item.key() + ".bin"), item.value());
    }
  }
  write_raw(dir / "idx.bin", idx);
  write_raw(dir / "targets.bin", targets);

  const auto t_py = std::chrono::steady_clock::now();
  const std::string script = std::string(DS_SOURCE_DIR) + "/tests/models/gpt2_reference.py";
  const std::string cmd = std::string(kPython) + " '" + script + "' '" + dir.string() + "' > '" +
                          (dir / "python.log").string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const double python_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_py).count();
  std::ifstream log_file(dir / "python.log");
  const std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  if (rc == kExitNoTorch) {
    fs::remove_all(dir);
    GTEST_SKIP() << "golden test skipped: " << kPython << " cannot import torch/numpy "
                 << "(install python3-torch): " << log;
  }
  ASSERT_EQ(rc, 0) << "reference script failed: " << cmd << "\n" << log;

  auto logits = model->forward(idx);
  auto loss = model->forward(idx, targets);
  model->zero_grad();
  loss.backward();

  double worst = expect_close("logits", logits.detach(),
                              read_f32(dir / "ref" / "logits.bin", logits.sizes()));
  worst = std::max(worst, expect_close("loss", loss.detach().reshape({1}),
                                       read_f32(dir / "ref" / "loss.bin", {1})));
  int compared = 0;
  for (const auto& item : model->named_parameters()) {
    const auto& g = item.value().grad();
    ASSERT_TRUE(g.defined()) << item.key() << " has no gradient";
    worst = std::max(worst, expect_close("grad " + item.key(), g,
                                         read_f32(dir / "ref" / "grad" / (item.key() + ".bin"),
                                                  g.sizes())));
    ++compared;
  }
  EXPECT_EQ(compared, 4 + 12 * cfg.n_layer);

  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[golden] python reference %.2f s, whole test %.2f s, %d gradients compared, "
              "worst error %.3f of tolerance\n", python_s, total_s, compared, worst);
  RecordProperty("python_seconds", std::to_string(python_s));
  if (!HasFailure()) fs::remove_all(dir);
  else std::printf("[golden] inputs and reference outputs kept in %s\n", dir.c_str());
}

}  // namespace
