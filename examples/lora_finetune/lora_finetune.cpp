// LoRA fine-tune of a GPT-2 from a Hugging Face-layout safetensors checkpoint — the C++ analogue of
// the seed's "LoRA fine-tune of OPT-125m". The base is loaded with load_hf_gpt2 and frozen
// (requires_grad false: the engine gives it no gradient, master copy or optimizer state); LoRA
// adapters around the attention and MLP Linears are the only trainable weights and the only ones
// saved. --make-base DIR first writes a tiny base checkpoint (a few pretraining steps) for CI.
#include <CLI/CLI.hpp>
#include <deepspeed/deepspeed.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "checkpoint/state_files.h"
#include "models/gpt2.h"
#include "models/gpt2_hf.h"
#include "models/token_data.h"

namespace {

using ds::models::GPT2;
using ds::models::GPT2Config;

// output = base(x) + (alpha / r) · B(A(x)); A [r,in] Kaiming-uniform, B [out,r] zeros, so the
// wrapped layer starts out exactly equal to the base. Names follow PEFT: "base", "lora_A", "lora_B".
struct LoraLinearImpl : torch::nn::Module {
  LoraLinearImpl(torch::nn::Linear base_layer, int64_t r, double alpha) : scale_(alpha / double(r)) {
    base = register_module("base", std::move(base_layer));
    const int64_t in = base->weight.size(1), out = base->weight.size(0);
    lora_A = register_module("lora_A", torch::nn::Linear(torch::nn::LinearOptions(in, r).bias(false)));
    lora_B = register_module("lora_B", torch::nn::Linear(torch::nn::LinearOptions(r, out).bias(false)));
    torch::NoGradGuard no_grad;
    torch::nn::init::kaiming_uniform_(lora_A->weight, std::sqrt(5.0));
    lora_B->weight.zero_();
  }
  torch::Tensor forward(const torch::Tensor& x) { return base(x) + scale_ * lora_B(lora_A(x)); }

  torch::nn::Linear base{nullptr}, lora_A{nullptr}, lora_B{nullptr};
  double scale_;
};
TORCH_MODULE(LoraLinear);

// GPT-2's attention and MLP with LoRA-wrapped projections; the arithmetic is src/models/gpt2.cpp's.
struct LoraAttentionImpl : torch::nn::Module {
  LoraAttentionImpl(ds::models::CausalSelfAttentionImpl& a, int64_t n_head, int64_t r, double alpha) : n_head_(n_head) {
    c_attn = register_module("c_attn", LoraLinear(a.c_attn, r, alpha));
    c_proj = register_module("c_proj", LoraLinear(a.c_proj, r, alpha));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2), d = c / n_head_;
    auto qkv = c_attn(x).split(c, 2);
    auto heads = [&](const torch::Tensor& z) { return z.view({b, t, n_head_, d}).transpose(1, 2); };
    auto q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(d));
    auto future = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    auto y = torch::matmul(torch::softmax(scores, -1), v);
    return c_proj(y.transpose(1, 2).contiguous().view({b, t, c}));
  }
  LoraLinear c_attn{nullptr}, c_proj{nullptr};
  int64_t n_head_;
};
TORCH_MODULE(LoraAttention);

struct LoraMlpImpl : torch::nn::Module {
  LoraMlpImpl(ds::models::MlpImpl& m, int64_t r, double alpha) {
    c_fc = register_module("c_fc", LoraLinear(m.c_fc, r, alpha));
    c_proj = register_module("c_proj", LoraLinear(m.c_proj, r, alpha));
  }
  torch::Tensor forward(const torch::Tensor& x) { return c_proj(torch::gelu(c_fc(x), "tanh")); }
  LoraLinear c_fc{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(LoraMlp);

struct LoraBlockImpl : torch::nn::Module {
  LoraBlockImpl(ds::models::BlockImpl& blk, int64_t n_head, int64_t r, double alpha) {
    ln_1 = register_module("ln_1", blk.ln_1);
    attn = register_module("attn", LoraAttention(*blk.attn, n_head, r, alpha));
    ln_2 = register_module("ln_2", blk.ln_2);
    mlp = register_module("mlp", LoraMlp(*blk.mlp, r, alpha));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = x + attn(ln_1(x));
    return h + mlp(ln_2(h));
  }
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  LoraAttention attn{nullptr};
  LoraMlp mlp{nullptr};
};
TORCH_MODULE(LoraBlock);

// The wrapped model: takes over a loaded (and frozen) GPT2's modules, so parameter names stay HF's
// with ".base" before the wrapped Linears' weights: "transformer.h.0.attn.c_attn.base.weight".
struct LoraGPT2Impl : torch::nn::Module {
  LoraGPT2Impl(GPT2& model, int64_t r, double alpha) {
    auto& tr = *model->transformer;
    auto t = register_module("transformer", std::make_shared<torch::nn::Module>());
    wte = t->register_module("wte", tr.wte);
    wpe = t->register_module("wpe", tr.wpe);
    h = t->register_module("h", torch::nn::ModuleList());
    for (size_t i = 0; i < tr.h->size(); ++i)
      h->push_back(LoraBlock(*tr.h->ptr<ds::models::BlockImpl>(i), model->config().n_head, r, alpha));
    ln_f = t->register_module("ln_f", tr.ln_f);
  }
  // idx, targets int64 [B,T] → mean cross-entropy (tied output projection, as GPT-2).
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets) {
    auto x = wte(idx) + wpe(torch::arange(idx.size(1), idx.options()));
    for (auto& blk : *h) x = blk->as<LoraBlockImpl>()->forward(x);
    return ds::models::lm_loss(torch::linear(ln_f(x), wte->weight), targets);
  }
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
};
TORCH_MODULE(LoraGPT2);

// CI's base model: a tiny GPT-2 pretrained `steps` steps on `data`, written as HF's GPT2LMHeadModel
// (model.safetensors with Conv1D weights transposed to [in, out], config.json).
void make_base(const std::string& dir, const ds::models::TokenDataset& data, int64_t steps, uint64_t seed) {
  torch::manual_seed(seed);
  auto cfg = GPT2Config::preset("tiny");
  auto model = GPT2(cfg);
  auto engine = ds::initialize(model, nlohmann::json{
      {"train_micro_batch_size_per_gpu", 8},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-3}}}}}});
  ds::models::BatchSampler sampler(data, cfg.n_positions, seed);
  for (int64_t s = 0; s < steps; ++s) {
    auto b = sampler.batch((s * engine.world_size() + engine.rank()) * 8, 8);
    engine.backward(engine.forward(b.inputs, b.targets));
    engine.step();
  }
  if (engine.rank() != 0) return;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : model->named_parameters()) {
    auto t = item.value().detach();
    tensors.emplace_back(item.key(), ds::models::is_conv1d_weight(item.key()) ? t.t().contiguous() : t.contiguous());
  }
  std::filesystem::create_directories(dir);
  ds::checkpoint::write_tensor_file(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  std::ofstream(dir + "/config.json") << ds::models::hf_config_json(cfg).dump(2) << "\n";
  std::printf("base: %lld pretraining steps, loss %.4f, written to %s/model.safetensors\n", (long long)steps,
              engine.last_loss(), dir.c_str());
}

int run(int argc, char** argv) {
  CLI::App app{"lora_finetune: LoRA adapters on a frozen Hugging Face GPT-2, trained through ds::initialize"};
  std::string config = std::string(DS_EXAMPLES_DIR) + "/configs/lora.json";
  std::string base_path, make_base_dir, out = "lora_adapter.safetensors";
  std::string data_path = std::string(DS_EXAMPLES_DIR) + "/../data/devils_dictionary.txt";
  int64_t steps = 100, rank_r = 8, seq = 64, base_steps = 30;
  double alpha = 16;
  uint64_t seed = 42;
  bool check = false;
  app.add_option("--config", config, "DeepSpeed JSON config")->capture_default_str();
  app.add_option("--base", base_path, "HF GPT-2: model.safetensors, its index.json, or a directory")->required();
  app.add_option("--make-base", make_base_dir, "first pretrain a tiny GPT-2 and write it here in HF layout (CI)");
  app.add_option("--base-steps", base_steps, "pretraining steps for --make-base")->capture_default_str();
  app.add_option("--data", data_path, "fine-tuning text (byte tokens) or llm.c token file")->capture_default_str();
  app.add_option("--steps", steps, "fine-tuning steps")->capture_default_str();
  app.add_option("--seq", seq, "sequence length")->capture_default_str();
  app.add_option("--r", rank_r, "LoRA rank")->capture_default_str();
  app.add_option("--alpha", alpha, "LoRA alpha (scale = alpha / r)")->capture_default_str();
  app.add_option("--out", out, "where to save the adapter weights (safetensors)")->capture_default_str();
  app.add_option("--seed", seed, "adapter init and data order seed")->capture_default_str();
  app.add_flag("--check", check, "exit 1 unless the loss falls and only adapters have optimizer state (CI)");
  CLI11_PARSE(app, argc, argv);

  auto data = ds::models::TokenDataset::from_file(data_path);
  if (!make_base_dir.empty()) make_base(make_base_dir, data, base_steps, seed);

  // The base's shape from its config.json when there is one, else GPT-2 small.
  namespace fs = std::filesystem;
  fs::path cfg_json = fs::is_directory(base_path) ? fs::path(base_path) / "config.json"
                                                  : fs::path(base_path).parent_path() / "config.json";
  GPT2Config cfg = GPT2Config::preset("small");
  if (fs::exists(cfg_json)) cfg = ds::models::config_from_hf_json(nlohmann::json::parse(std::ifstream(cfg_json)));
  if (seq > cfg.n_positions) throw std::runtime_error(fmt::format("--seq {} exceeds the base's n_positions {}", seq, cfg.n_positions));

  // Load, freeze, then wrap: the adapters are created after the base weights are in place.
  auto base = GPT2(cfg);
  ds::models::load_hf_gpt2(*base, base_path);
  for (auto& p : base->parameters()) p.requires_grad_(false);
  torch::manual_seed(seed);
  auto model = LoraGPT2(base, rank_r, alpha);
  base = nullptr;  // the wrapped model now owns the base's modules

  int64_t trainable = 0, frozen = 0;
  for (const auto& p : model->parameters()) (p.requires_grad() ? trainable : frozen) += p.numel();

  auto engine = ds::initialize(model, config);
  const int rank = engine.rank(), world = engine.world_size();
  const int64_t micro = engine.train_micro_batch_size_per_gpu(), gas = engine.gradient_accumulation_steps();
  // Proof that frozen weights cost no optimizer memory: the engine's flat (gradient + optimizer)
  // buffers hold exactly the adapter elements.
  const int64_t flat = engine.flat_parameters().numel();
  if (rank == 0) {
    std::printf("base: %s (%s)\nLoRA r=%lld alpha=%g on c_attn, attn.c_proj, c_fc, mlp.c_proj\n", base_path.c_str(),
                cfg.describe().c_str(), (long long)rank_r, alpha);
    std::printf("parameters: %lld trainable (adapters), %lld frozen (base), %.2f%% trained; engine's optimizer "
                "holds %lld elements\n", (long long)trainable, (long long)frozen,
                100.0 * double(trainable) / double(trainable + frozen), (long long)flat);
    std::printf("%s", engine.memory_report().c_str());
    std::fflush(stdout);
  }

  // Held-out batch (samples past any training index) scored before and after: the per-step training
  // loss of 8 random windows is too noisy to judge progress by in a short run.
  ds::models::BatchSampler sampler(data, seq, seed + 1);
  auto held_out = sampler.batch(int64_t(1) << 40, 64);
  auto eval_loss = [&] {
    torch::NoGradGuard no_grad;
    return model->forward(held_out.inputs, held_out.targets).item<double>();
  };
  const double first = eval_loss();
  if (rank == 0) std::printf("held-out loss before fine-tuning: %.4f\n", first);
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t m = 0; m < gas; ++m) {
      auto b = sampler.batch(((s * gas + m) * world + rank) * micro, micro);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    if (rank == 0 && (s == 0 || (s + 1) % std::max<int64_t>(1, steps / 10) == 0)) {
      std::printf("step %lld: train loss %.4f\n", (long long)s + 1, engine.last_loss());
      std::fflush(stdout);
    }
  }

  const double last = eval_loss();
  // Only the adapters are saved: "transformer.h.0.attn.c_attn.lora_A.weight", ...
  if (rank == 0) {
    std::vector<std::pair<std::string, torch::Tensor>> adapters;
    for (const auto& item : model->named_parameters())
      if (item.value().requires_grad()) adapters.emplace_back(item.key(), item.value().detach().contiguous());
    if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path());
    ds::checkpoint::write_tensor_file(out, adapters, {{"format", "pt"}, {"lora_r", std::to_string(rank_r)},
                                                      {"lora_alpha", fmt::format("{}", alpha)}});
    std::printf("saved %zu adapter tensors (%lld parameters) to %s\ndone: %lld steps, held-out loss %.4f -> %.4f\n",
                adapters.size(), (long long)trainable, out.c_str(), (long long)steps, first, last);
  }
  if (check && (!(last < first) || flat != trainable)) {
    std::fprintf(stderr, "lora_finetune: --check failed: loss %.4f -> %.4f, optimizer elements %lld vs %lld adapters\n",
                 first, last, (long long)flat, (long long)trainable);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "lora_finetune: error (LibTorch): %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lora_finetune: error: %s\n", e.what());
  }
  return 1;
}
