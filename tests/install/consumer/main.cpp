// A user's own model trained through ds::initialize against the installed library: a custom
// two-layer torch::nn::Module that exposes its LayerList (so ZeRO-3 gathers layer by layer), trained
// a few steps at ZeRO-2 and at ZeRO-3. Exits 0 when the loss falls at both stages.
#include <deepspeed/deepspeed.h>

#include <cstdio>

struct TwoLayerImpl : torch::nn::Module {
  TwoLayerImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 1));
    layers_.add("fc1", [this](const torch::Tensor& x) { return torch::relu(fc1(x)); }, {"fc1.weight", "fc1.bias"});
    layers_.add("fc2", [this](const torch::Tensor& x) { return fc2(x); }, {"fc2.weight", "fc2.bias"});
  }
  torch::Tensor forward(const torch::Tensor& x) { return layers_.forward(x); }
  ds::nn::LayerList& layers() { return layers_; }

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  ds::nn::LayerList layers_;
};
TORCH_MODULE(TwoLayer);

bool train(int stage) {
  torch::manual_seed(0);
  const auto x = torch::randn({64, 8});
  const auto y = x.sum(1, /*keepdim=*/true) * 0.5;
  auto engine = ds::initialize(TwoLayer(), nlohmann::json{
      {"train_batch_size", 16},
      {"optimizer", {{"type", "Adam"}, {"params", {{"lr", 0.01}}}}},
      {"zero_optimization", {{"stage", stage}}},
      {"steps_per_print", 1000}});
  double first = 0, last = 0;
  for (int step = 0; step < 12; ++step) {
    const auto idx = torch::arange((step % 4) * 16, (step % 4) * 16 + 16);
    auto loss = torch::mse_loss(engine.forward(x.index_select(0, idx)), y.index_select(0, idx));
    engine.backward(loss);
    engine.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  std::printf("ZeRO-%d: loss %.4f -> %.4f\n", stage, first, last);
  return last < first;
}

int main() {
  const bool ok = train(2) && train(3);
  std::printf("%s\n", ok ? "two_layer_zero: ok" : "two_layer_zero: the loss did not fall");
  return ok ? 0 : 1;
}
