// CIFAR-10 CNN trained through ds::initialize — the C++ analogue of DeepSpeed's CIFAR-10 tutorial
// (conv-relu-pool ×2, then fully connected layers). Real data with --data DIR (the binary CIFAR-10
// files); otherwise a synthetic, deterministic, learnable CIFAR-shaped set so CI needs no download.
// Under mpirun each rank trains on its own shard of every global batch.
#include <CLI/CLI.hpp>
#include <deepspeed/deepspeed.h>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int64_t kClasses = 10, kChannels = 3, kSide = 32;
constexpr int64_t kPixels = kChannels * kSide * kSide;  // 3072
constexpr int64_t kRecord = 1 + kPixels;                // label byte + pixels

// The seed's network plus a hidden fc layer: [B,3,32,32] → logits [B,10].
struct CifarNetImpl : torch::nn::Module {
  CifarNetImpl() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 32, 3).padding(1)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    fc1 = register_module("fc1", torch::nn::Linear(64 * 8 * 8, 128));
    fc2 = register_module("fc2", torch::nn::Linear(128, kClasses));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(conv1(x)), 2);  // [B,32,16,16]
    h = torch::max_pool2d(torch::relu(conv2(h)), 2);       // [B,64,8,8]
    return fc2(torch::relu(fc1(h.flatten(1))));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(CifarNet);

struct Dataset {
  torch::Tensor images;  // float [N,3,32,32], normalised
  torch::Tensor labels;  // int64 [N]
};

// One binary CIFAR-10 file: records of 1 label byte + 3072 pixel bytes (R, G, B planes).
Dataset read_cifar_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open (expected the binary CIFAR-10 files, e.g. data_batch_1.bin)");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size == 0 || size % kRecord != 0)
    throw std::runtime_error(fmt::format("{}: {} bytes is not a whole number of {}-byte CIFAR-10 records "
                                         "(1 label byte + 3072 pixel bytes); truncated or not a CIFAR-10 binary file",
                                         path, size, kRecord));
  const int64_t n = size / kRecord;
  auto raw = torch::from_blob(bytes.data(), {n, kRecord}, torch::kUInt8).clone();
  auto labels = raw.select(1, 0).to(torch::kLong);
  const int64_t bad = labels.ge(kClasses).nonzero().numel();
  if (bad > 0) {
    const int64_t i = labels.ge(kClasses).nonzero()[0][0].item<int64_t>();
    throw std::runtime_error(fmt::format("{}: record {} has label {} (CIFAR-10 labels are 0-9); not a CIFAR-10 binary file",
                                         path, i, labels[i].item<int64_t>()));
  }
  auto images = raw.slice(1, 1).to(torch::kFloat).div_(255.0).view({n, kChannels, kSide, kSide});
  return {images, labels};
}

Dataset concat(const std::vector<Dataset>& parts) {
  std::vector<torch::Tensor> x, y;
  for (const auto& p : parts) x.push_back(p.images), y.push_back(p.labels);
  return {torch::cat(x), torch::cat(y)};
}

// Per-channel mean/std of CIFAR-10's training set, as torchvision's usual Normalize.
void normalise(Dataset& d) {
  auto mean = torch::tensor({0.4914f, 0.4822f, 0.4465f}).view({1, 3, 1, 1});
  auto std = torch::tensor({0.2470f, 0.2435f, 0.2616f}).view({1, 3, 1, 1});
  d.images = (d.images - mean) / std;
}

// Synthetic CIFAR-shaped data: each class has a fixed random low-frequency pattern (8×8 upsampled);
// a sample is its class pattern plus strong pixel noise. The patterns come from `seed` alone, so the
// train and test sets (different `split`) share them; same arguments → same data on every rank.
Dataset synthetic(int64_t n, uint64_t seed, uint64_t split) {
  auto patterns = torch::randn({kClasses, kChannels, 8, 8}, at::detail::createCPUGenerator(seed));
  auto gen = at::detail::createCPUGenerator(seed * 7919 + split + 1);
  patterns = torch::upsample_nearest2d(patterns, {kSide, kSide});                 // [10,3,32,32]
  auto labels = torch::randint(kClasses, {n}, gen, torch::TensorOptions(torch::kLong));
  auto noise = torch::randn({n, kChannels, kSide, kSide}, gen);
  return {patterns.index_select(0, labels) + 4.0 * noise, labels};
}

// Accuracy and mean loss over a whole set, in the model's dtype, without gradients.
std::pair<double, double> evaluate(CifarNetImpl& model, const Dataset& d, torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  double loss_sum = 0;
  const int64_t n = d.labels.size(0);
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t e = std::min(n, i + 256);
    auto logits = model.forward(d.images.slice(0, i, e).to(dtype)).to(torch::kFloat);
    auto y = d.labels.slice(0, i, e);
    loss_sum += torch::cross_entropy_loss(logits, y, {}, at::Reduction::Sum).item<double>();
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
  }
  return {loss_sum / double(n), double(correct) / double(n)};
}

int run(int argc, char** argv) {
  CLI::App app{"cifar10_cnn: a CIFAR-10 CNN trained through ds::initialize"};
  std::string config = std::string(DS_EXAMPLES_DIR) + "/configs/cifar10.json", data_dir;
  int64_t epochs = 2, steps = 0, samples = 10000;
  uint64_t seed = 1234;
  bool check = false;
  app.add_option("--config", config, "DeepSpeed JSON config")->capture_default_str();
  app.add_option("--data", data_dir, "directory with data_batch_1.bin ... data_batch_5.bin and test_batch.bin "
                                     "(default: synthetic CIFAR-shaped data)");
  app.add_option("--epochs", epochs, "passes over the training set")->capture_default_str();
  app.add_option("--steps", steps, "stop after this many optimizer steps (0: run every epoch)");
  app.add_option("--samples", samples, "synthetic training set size (the test set is a quarter of it)")
      ->capture_default_str();
  app.add_option("--seed", seed, "model init and synthetic data seed")->capture_default_str();
  app.add_flag("--check", check, "exit 1 unless the last epoch's loss is below the first's (CI)");
  CLI11_PARSE(app, argc, argv);

  Dataset train, test;
  if (!data_dir.empty()) {
    std::vector<Dataset> parts;
    for (int i = 1; i <= 5; ++i) parts.push_back(read_cifar_file(fmt::format("{}/data_batch_{}.bin", data_dir, i)));
    train = concat(parts);
    test = read_cifar_file(data_dir + "/test_batch.bin");
    normalise(train), normalise(test);
  } else {
    train = synthetic(samples, seed, 0);
    test = synthetic(std::max<int64_t>(samples / 4, 1), seed, 1);
  }

  torch::manual_seed(seed);
  auto model = CifarNet();
  auto engine = ds::initialize(model, config);
  const int rank = engine.rank(), world = engine.world_size();
  const int64_t micro = engine.train_micro_batch_size_per_gpu(), gas = engine.gradient_accumulation_steps();
  const int64_t global_batch = engine.train_batch_size();  // micro × GAS × world
  const int64_t steps_per_epoch = train.labels.size(0) / global_batch;
  if (steps_per_epoch < 1)
    throw std::runtime_error(fmt::format("{} training samples is less than one global batch of {}", train.labels.size(0), global_batch));
  const auto dtype = engine.model().fc1->weight.scalar_type();
  if (rank == 0) {
    std::printf("data: %s, %lld train / %lld test images\nbatch: %lld (micro %lld x GAS %lld x %d ranks), %lld steps per epoch\n",
                data_dir.empty() ? "synthetic CIFAR-shaped" : data_dir.c_str(), (long long)train.labels.size(0),
                (long long)test.labels.size(0), (long long)global_batch, (long long)micro, (long long)gas, world,
                (long long)steps_per_epoch);
    std::printf("%s", engine.memory_report().c_str());
    std::fflush(stdout);
  }

  double first_loss = -1, last_loss = -1;
  int64_t step = 0;
  for (int64_t epoch = 0; epoch < epochs && (steps == 0 || step < steps); ++epoch) {
    // Each epoch visits the training set in a new seeded order; rank r takes its slice of every batch.
    auto order = torch::randperm(train.labels.size(0), at::detail::createCPUGenerator(seed * 1000 + epoch),
                                 torch::TensorOptions(torch::kLong));
    double loss_sum = 0;
    int64_t epoch_steps = 0;
    for (int64_t s = 0; s < steps_per_epoch && (steps == 0 || step < steps); ++s, ++step) {
      for (int64_t m = 0; m < gas; ++m) {
        auto idx = order.slice(0, s * global_batch + (m * world + rank) * micro).slice(0, 0, micro);
        auto logits = engine.forward(train.images.index_select(0, idx).to(dtype));
        auto loss = torch::cross_entropy_loss(logits.to(torch::kFloat), train.labels.index_select(0, idx));
        engine.backward(loss);
        engine.step();
      }
      loss_sum += engine.last_loss();
      ++epoch_steps;
    }
    // Mean training loss over all ranks' shards; test metrics are the same on every rank.
    double mean = loss_sum / double(epoch_steps);
    engine.communicator().all_reduce(ds::comm::Buffer(&mean, 1), ds::comm::ReduceOp::Sum);
    const double epoch_loss = mean / world;
    auto [test_loss, test_acc] = evaluate(engine.model(), test, dtype);
    if (first_loss < 0) first_loss = epoch_loss;
    last_loss = epoch_loss;
    if (rank == 0) {
      std::printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.1f%%, lr %.2e\n", (long long)epoch + 1,
                  epoch_loss, test_loss, 100.0 * test_acc, engine.get_lr().at(0));
      std::fflush(stdout);
    }
  }
  if (rank == 0) std::printf("done: %lld steps, loss %.4f -> %.4f\n", (long long)step, first_loss, last_loss);
  if (check && !(last_loss < first_loss)) {
    std::fprintf(stderr, "cifar10_cnn: --check: loss did not fall (%.4f -> %.4f)\n", first_loss, last_loss);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "cifar10_cnn: error (LibTorch): %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cifar10_cnn: error: %s\n", e.what());
  }
  return 1;
}
