// The seed's second example, in C++: LoRA fine-tuning of OPT-125m (the real architecture and size,
// random weights, or a downloaded Hugging Face checkpoint with --model-dir) through ds::initialize
// with the seed's DeepSpeed config (ZeRO-2, optimizer offloaded to the CPU). The task is one the
// base cannot do: a fixed random key → value mapping ("key 123 -> value 456"), shown as packed lines
// in random combinations; the held-out set is combinations never trained on, and accuracy is the
// share of its pairs whose three value digits the model predicts (argmax) exactly. The frozen base
// stays in bf16 with no gradient or optimizer state; the adapter is saved in PEFT's format.
#include <CLI/CLI.hpp>
#include <deepspeed/deepspeed.h>
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "models/lora.h"
#include "models/pretrained.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// OPT-125m's config.json (facebook/opt-125m), and a tiny model of the same family for CI.
json opt_shape(const std::string& shape) {
  json j = {{"model_type", "opt"}, {"vocab_size", 50272}, {"hidden_size", 768}, {"ffn_dim", 3072},
            {"num_hidden_layers", 12}, {"num_attention_heads", 12}, {"max_position_embeddings", 2048},
            {"do_layer_norm_before", true}, {"word_embed_proj_dim", 768}, {"pad_token_id", 1},
            {"bos_token_id", 2}, {"eos_token_id", 2}, {"activation_function", "relu"}};
  if (shape == "tiny") {
    j["vocab_size"] = 256;
    j["hidden_size"] = j["word_embed_proj_dim"] = 64;
    j["ffn_dim"] = 256;
    j["num_hidden_layers"] = 2;
    j["num_attention_heads"] = 4;
    j["max_position_embeddings"] = 128;
    j["init_std"] = 0.2;  // at width 64, HF's 0.02 leaves the tied head's logits within about ±1.3
  } else if (shape != "125m") {
    throw CLI::ValidationError("--shape", "must be 125m or tiny, got '" + shape + "'");
  }
  return j;
}

// The key → value task on byte tokens (every OPT vocabulary has ids 0..255; a real tokenizer is
// not needed for a synthetic task). A sample is `pairs` lines "key KKK -> value VVV\n".
class KeyValueTask {
 public:
  static constexpr int64_t kLine = 22;  // bytes in "key 123 -> value 456\n"

  KeyValueTask(int64_t keys, int64_t pairs, uint64_t seed) : pairs_(pairs), rng_(seed) {
    std::vector<int> pool(900);
    for (int i = 0; i < 900; ++i) pool[i] = 100 + i;
    std::shuffle(pool.begin(), pool.end(), rng_);
    keys_.assign(pool.begin(), pool.begin() + keys);
    std::uniform_int_distribution<int> value(100, 999);
    for (int64_t i = 0; i < keys; ++i) values_.push_back(value(rng_));
  }
  int64_t seq_len() const { return pairs_ * kLine; }  // tokens per sample (inputs are one shorter)

  // Held-out combinations: drawn first, and never drawn for training.
  std::vector<std::vector<int>> held_out(int64_t n) {
    double combos = 1;
    for (int64_t p = 0; p < pairs_; ++p) combos *= static_cast<double>(keys_.size());
    if (static_cast<double>(n) > combos / 2)
      throw CLI::ValidationError("--held-out", fmt::format("{} samples would leave too few of the {} combinations of "
                                                           "{} keys x {} pairs for training; lower it or raise --keys "
                                                           "or --pairs", n, combos, keys_.size(), pairs_));
    std::vector<std::vector<int>> out;
    while (static_cast<int64_t>(out.size()) < n) {
      auto c = draw();
      if (held_.insert(c).second) out.push_back(c);
    }
    return out;
  }
  std::vector<std::vector<int>> train_batch(int64_t n) {
    std::vector<std::vector<int>> out;
    while (static_cast<int64_t>(out.size()) < n) {
      auto c = draw();
      if (!held_.count(c)) out.push_back(c);
    }
    return out;
  }

  // inputs [n, L-1]; targets [n, L-1] = the next byte on value digits, -100 elsewhere (the keys
  // are random: loss only where there is something to learn, as labels -100 on prompts).
  std::pair<torch::Tensor, torch::Tensor> tensors(const std::vector<std::vector<int>>& combos) const {
    const int64_t n = static_cast<int64_t>(combos.size()), len = seq_len();
    auto tokens = torch::empty({n, len}, torch::kInt64);
    auto targets = torch::full({n, len - 1}, -100, torch::kInt64);
    auto tok = tokens.accessor<int64_t, 2>();
    auto tgt = targets.accessor<int64_t, 2>();
    for (int64_t b = 0; b < n; ++b) {
      std::string text;
      for (int k : combos[b]) text += fmt::format("key {} -> value {}\n", keys_[k], values_[k]);
      for (int64_t t = 0; t < len; ++t) tok[b][t] = static_cast<unsigned char>(text[t]);
      for (int64_t p = 0; p < pairs_; ++p)
        for (int64_t d = 0; d < 3; ++d) {
          const int64_t pos = p * kLine + 18 + d;  // the value's digits: bytes 18..20 of a line
          tgt[b][pos - 1] = tok[b][pos];
        }
    }
    return {tokens.narrow(1, 0, len - 1).contiguous(), targets};
  }
  int64_t pairs() const { return pairs_; }
  std::string example(int k) const { return fmt::format("key {} -> value {}", keys_[k], values_[k]); }

 private:
  std::vector<int> draw() {
    std::uniform_int_distribution<int> pick(0, static_cast<int>(keys_.size()) - 1);
    std::vector<int> c;
    for (int64_t p = 0; p < pairs_; ++p) c.push_back(pick(rng_));
    return c;
  }
  int64_t pairs_;
  std::mt19937_64 rng_;
  std::vector<int> keys_, values_;
  std::set<std::vector<int>> held_;
};

struct Eval {
  double loss = 0, accuracy = 0;
};

// Held-out loss (value digits) and accuracy (pairs whose 3 digits are all the argmax).
Eval evaluate(ds::models::CausalLM& model, const torch::Tensor& inputs, const torch::Tensor& targets, int64_t pairs) {
  torch::NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0, total = 0, chunks = 0;
  for (int64_t b = 0; b < inputs.size(0); b += 16) {
    const int64_t n = std::min<int64_t>(16, inputs.size(0) - b);
    auto x = inputs.narrow(0, b, n), y = targets.narrow(0, b, n);
    auto logits = model.forward(x);
    loss_sum += ds::models::lm_loss(logits, y).item<double>();
    ++chunks;
    auto hit = (logits.argmax(-1) == y) | (y == -100);  // [n, T]
    auto per_pair = hit.narrow(1, 0, pairs * KeyValueTask::kLine - 1);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < pairs; ++p) {
        const int64_t at = p * KeyValueTask::kLine + 17;  // targets of the 3 digits sit at 17..19
        correct += per_pair[i].narrow(0, at, 3).all().item<bool>() ? 1 : 0;
        ++total;
      }
  }
  model.train();
  return {loss_sum / static_cast<double>(chunks), static_cast<double>(correct) / static_cast<double>(total)};
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"lora_opt: LoRA fine-tuning of OPT-125m with the seed's DeepSpeed config (ZeRO-2 + CPU offload)"};
  std::string config = std::string(DS_EXAMPLES_DIR) + "/configs/lora_opt.json";
  std::string model_dir, shape = "125m", out = "lora_opt_adapter", targets = "q_proj,k_proj,v_proj,out_proj,fc1,fc2";
  int64_t steps = 200, r = 8, keys = 32, pairs = 4, held_out_n = 128, log_every = 0;
  double alpha = 16, dropout = 0.0, min_accuracy = 0.9;
  uint64_t seed = 1234;
  bool check = false;
  app.add_option("--config", config, "DeepSpeed JSON config")->capture_default_str();
  app.add_option("--model-dir", model_dir, "a Hugging Face OPT checkpoint folder (config.json + safetensors); "
                                           "default: random weights of --shape");
  app.add_option("--shape", shape, "125m (OPT-125m's real shape) or tiny (CI)")->capture_default_str();
  app.add_option("--steps", steps, "optimizer steps")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--r", r, "LoRA rank")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--alpha", alpha, "LoRA alpha (scale alpha/r)")->capture_default_str();
  app.add_option("--dropout", dropout, "LoRA dropout")->capture_default_str()->check(CLI::Range(0.0, 0.99));
  app.add_option("--targets", targets, "target_modules, comma-separated (PEFT's names)")->capture_default_str();
  app.add_option("--keys", keys, "keys in the mapping")->capture_default_str()->check(CLI::Range(2, 900));
  app.add_option("--pairs", pairs, "key/value lines per sample")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--held-out", held_out_n, "held-out samples")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--out", out, "PEFT adapter folder to write")->capture_default_str();
  app.add_option("--seed", seed, "task and adapter seed")->capture_default_str();
  app.add_option("--log-every", log_every, "print the train loss every N steps (0: 10 times)");
  app.add_option("--min-accuracy", min_accuracy, "--check's held-out accuracy threshold")->capture_default_str();
  app.add_flag("--check", check, "exit 1 unless held-out accuracy goes from < 0.2 to >= --min-accuracy, the base "
                                 "is unchanged and the adapter files are written (CI)");
  CLI11_PARSE(app, argc, argv);

  torch::manual_seed(seed);
  std::shared_ptr<ds::models::CausalLM> model =
      model_dir.empty() ? ds::models::from_config(opt_shape(shape)) : ds::models::from_pretrained(model_dir);
  ds::models::LoraConfig lora;
  lora.r = r;
  lora.lora_alpha = alpha;
  lora.lora_dropout = dropout;
  lora.target_modules = split(targets);
  lora.base_model_name_or_path = model_dir.empty() ? "facebook/opt-125m (architecture, random weights)" : model_dir;
  const auto adapted = ds::models::apply_lora(*model, lora);
  int64_t trainable = 0, frozen = 0;
  for (const auto& p : model->parameters()) (p.requires_grad() ? trainable : frozen) += p.numel();
  // The probe for "the base is unchanged": one frozen weight, bit for bit.
  const std::string probe_name = adapted.front() + ".weight";
  const auto probe = model->named_parameters()[probe_name].clone();

  KeyValueTask task(keys, pairs, seed);
  const auto [eval_x, eval_y] = task.tensors(task.held_out(held_out_n));

  auto engine = ds::initialize(model, config);
  const int rank = engine.rank(), world = engine.world_size();
  const int64_t micro = engine.train_micro_batch_size_per_gpu(), gas = engine.gradient_accumulation_steps();
  if (rank == 0) {
    std::printf("model: %s\nLoRA r=%lld alpha=%g dropout=%g on %zu modules (%s)\n", model->describe().c_str(),
                (long long)r, alpha, dropout, adapted.size(), targets.c_str());
    std::printf("parameters: %lld trainable (adapters, fp32), %lld frozen (base, bf16), %.3f%% trained\n",
                (long long)trainable, (long long)frozen, 100.0 * double(trainable) / double(trainable + frozen));
    std::printf("task: %lld keys, %lld pairs per sample, e.g. \"%s\"; batch %lld x %lld accumulation x %d ranks\n",
                (long long)keys, (long long)pairs, task.example(0).c_str(), (long long)micro, (long long)gas, world);
    std::printf("%s", engine.memory_report().c_str());
  }
  const Eval before = evaluate(*model, eval_x, eval_y, pairs);
  if (rank == 0) {
    std::printf("held-out before: loss %.4f, accuracy %.1f%%\n", before.loss, 100 * before.accuracy);
    std::fflush(stdout);
  }

  const int64_t every = log_every > 0 ? log_every : std::max<int64_t>(1, steps / 10);
  double step_seconds = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t m = 0; m < gas; ++m) {
      // Every rank draws the whole global batch and keeps its share: the same data at any world size.
      auto combos = task.train_batch(micro * world);
      std::vector<std::vector<int>> mine(combos.begin() + rank * micro, combos.begin() + (rank + 1) * micro);
      auto [x, y] = task.tensors(mine);
      engine.backward(engine.forward(x, y));
      engine.step();
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) step_seconds += dt;  // the first step warms up
    if (rank == 0 && ((s + 1) % every == 0 || s == 0)) {
      std::printf("step %lld/%lld: train loss %.4f (%.2f s/step)\n", (long long)s + 1, (long long)steps,
                  engine.last_loss(), dt);
      std::fflush(stdout);
    }
  }
  const Eval after = evaluate(*model, eval_x, eval_y, pairs);
  const bool base_unchanged = torch::equal(probe, model->named_parameters()[probe_name]);
  bool files = true;
  if (rank == 0) {
    ds::models::save_lora_adapter(*model, lora, out);
    files = fs::exists(fs::path(out) / "adapter_model.safetensors") && fs::exists(fs::path(out) / "adapter_config.json");
    std::printf("held-out after:  loss %.4f, accuracy %.1f%%\n", after.loss, 100 * after.accuracy);
    std::printf("adapter: %s/adapter_model.safetensors + adapter_config.json (PEFT)\n", out.c_str());
    std::printf("timing: %.3f s/step (mean of steps 2..%lld, %lld samples each); peak RSS %.0f MiB; base weights %s\n",
                steps > 1 ? step_seconds / double(steps - 1) : 0.0, (long long)steps, (long long)(micro * gas * world),
                peak_rss_mib(), base_unchanged ? "bit-identical" : "CHANGED");
  }
  if (check && (!(before.accuracy < 0.2) || !(after.accuracy >= min_accuracy) || !base_unchanged || !files)) {
    std::fprintf(stderr, "lora_opt: --check failed: accuracy %.3f -> %.3f (want < 0.2 -> >= %.2f), base %s, files %s\n",
                 before.accuracy, after.accuracy, min_accuracy, base_unchanged ? "unchanged" : "changed",
                 files ? "written" : "missing");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "lora_opt: error (LibTorch): %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lora_opt: error: %s\n", e.what());
  }
  return 1;
}
