// Tests src/profiling/flops_report.*: DeepSpeed's number formatting, every summary key, the
// aggregated block, the detailed module tree parsed back (names, depth, params summing to the
// total), output_file, and the MFU line with a measured GEMM peak.
#include "profiling/flops_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <tuple>

#include "models/gpt2.h"
#include "profiling/flops_profiler.h"

namespace ds::profiling {
namespace {

// A small model whose modules all hold < 1000 parameters, so the printed counts are exact.
struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    fc = register_module("fc", torch::nn::Linear(8, 8));
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})));
  }
  torch::Tensor forward(const torch::Tensor& x) { return ln(torch::relu(fc(x))) + x; }
  torch::nn::Linear fc{nullptr};
  torch::nn::LayerNorm ln{nullptr};
};
TORCH_MODULE(Block);

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 8));
    block = register_module("block", Block());
    fc2 = register_module("fc2", torch::nn::Linear(8, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(block(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  Block block{nullptr};
};
TORCH_MODULE(Net);

struct TreeLine {
  std::string path;
  int depth = 0;
  std::string type;
  std::string params;  // the text before " = x% Params"
};

// Parses the "Detailed Profile per GPU" tree: "Type(" + annotation line, or "Type(annotation)";
// children as "(key): Type(...", two more spaces per level.
std::vector<TreeLine> parse_tree(const std::string& text, const std::string& root_type) {
  std::istringstream in(text.substr(text.find("Detailed Profile per GPU")));
  std::string line;
  while (std::getline(in, line) && line.rfind(root_type + "(", 0) != 0) {
  }
  std::vector<TreeLine> out;
  std::vector<std::string> stack;  // path per depth
  bool want_annotation = false;
  do {
    if (line.rfind("-----", 0) == 0) break;
    const size_t indent = line.find_first_not_of(' ');
    std::string body = line.substr(indent);
    if (body == ")") continue;
    if (want_annotation) {
      out.back().params = body.substr(0, body.find(" = "));
      want_annotation = false;
      continue;
    }
    TreeLine t;
    t.depth = static_cast<int>(indent / 2);
    std::string key;
    if (body[0] == '(') {
      key = body.substr(1, body.find("): ") - 1);
      body = body.substr(body.find("): ") + 3);
    }
    t.type = body.substr(0, body.find('('));
    stack.resize(static_cast<size_t>(t.depth));
    const std::string parent = stack.empty() ? "" : stack.back();
    t.path = parent.empty() ? key : parent + "." + key;
    stack.push_back(t.path);
    const std::string rest = body.substr(body.find('(') + 1);
    if (rest.empty()) {
      want_annotation = true;
    } else {
      t.params = rest.substr(0, rest.find(" = "));
    }
    out.push_back(t);
  } while (std::getline(in, line));
  return out;
}

TEST(FlopsReport, NumberFormattingMatchesDeepSpeed) {
  EXPECT_EQ(number_to_string(0), "0 ");
  EXPECT_EQ(number_to_string(1234), "1.23 K");
  EXPECT_EQ(params_to_string(124439808), "124.44 M");
  EXPECT_EQ(params_to_string(1.5e9), "1.5 B");
  EXPECT_EQ(params_to_string(146), "146");
  EXPECT_EQ(macs_to_string(3.13993e12), "3.14 TMACs");
  EXPECT_EQ(flops_to_string(8.19e13), "81.9 TFLOPS");
  EXPECT_EQ(duration_to_string(0.0125), "12.5 ms");
  EXPECT_EQ(duration_to_string(3.4e-5), "34 us");
  EXPECT_EQ(duration_to_string(1.0), "1 s");
}

TEST(FlopsReport, DetailedTreeParsesBack) {
  torch::manual_seed(0);
  Net net;
  FlopsProfiler prof(*net);
  prof.start();
  net->forward(torch::randn({3, 4}));
  prof.stop();
  FlopsProfilerConfig cfg;
  const std::string text = prof.render(ProfileTimings{}, cfg);
  const auto tree = parse_tree(text, "Net");
  ASSERT_EQ(tree.size(), 6u) << text;
  const std::vector<std::tuple<std::string, int, std::string>> expected = {
      {"", 0, "Net"},       {"fc1", 1, "Linear"},    {"block", 1, "Block"},
      {"block.fc", 2, "Linear"}, {"block.ln", 2, "LayerNorm"}, {"fc2", 1, "Linear"}};
  std::map<std::string, int64_t> params;
  for (size_t i = 0; i < tree.size(); ++i) {
    EXPECT_EQ(tree[i].path, std::get<0>(expected[i]));
    EXPECT_EQ(tree[i].depth, std::get<1>(expected[i]));
    EXPECT_EQ(tree[i].type, std::get<2>(expected[i]));
    params[tree[i].path] = std::stoll(tree[i].params);
  }
  EXPECT_EQ(params[""], 4 * 8 + 8 + 8 * 8 + 8 + 16 + 8 * 2 + 2);
  EXPECT_EQ(params[""], params["fc1"] + params["block"] + params["fc2"]);
  EXPECT_EQ(params["block"], params["block.fc"] + params["block.ln"]);
  EXPECT_NE(text.find("(fc1): Linear(40 = "), std::string::npos);
  EXPECT_NE(text.find("in_features=4, out_features=8, bias=true)"), std::string::npos);
}

TEST(FlopsReport, Gpt2TreeNamesDepthsAndParamSums) {
  torch::manual_seed(0);
  models::GPT2 model(models::GPT2Config::preset("tiny"));
  FlopsProfiler prof(*model);
  prof.start();
  model->forward(torch::randint(0, 256, {1, 8}));
  prof.stop();
  const std::string text = prof.render(ProfileTimings{}, FlopsProfilerConfig{});
  const auto tree = parse_tree(text, "GPT2");
  std::map<std::string, int> depth;
  for (const auto& t : tree) depth[t.path] = t.depth;
  EXPECT_EQ(depth.at("transformer"), 1);
  EXPECT_EQ(depth.at("transformer.wte"), 2);
  EXPECT_EQ(depth.at("transformer.h.1"), 3);
  EXPECT_EQ(depth.at("transformer.h.1.attn.c_attn"), 5);
  EXPECT_EQ(depth.at("transformer.ln_f"), 2);
  // Exact sums from the tree: every module's params are its children's (none hold their own
  // except the leaves), and the root holds the model's parameter count.
  std::function<void(const ModuleProfile&)> check = [&](const ModuleProfile& m) {
    if (m.children.empty()) return;
    int64_t sum = 0, flops = 0;
    for (const auto& c : m.children) {
      sum += c.params;
      flops += c.flops;
      check(c);
    }
    EXPECT_EQ(sum, m.params) << m.path;
    EXPECT_LE(flops, m.flops) << m.path;
  };
  const ModuleProfile r = prof.result();
  check(r);
  EXPECT_EQ(r.params, models::GPT2Config::preset("tiny").num_parameters());
}

TEST(FlopsReport, SummaryHasEveryDeepSpeedKey) {
  torch::nn::Linear fc(8, 8);
  FlopsProfiler prof(*fc);
  prof.start();
  fc(torch::randn({4, 8}));
  prof.stop();
  ProfileTimings t;
  t.profile_step = 3;
  t.world_size = 2;
  t.dp_world_size = 2;
  t.micro_batch_size = 4;
  t.fwd_latency_s = 0.010;
  t.bwd_latency_s = 0.020;
  t.step_latency_s = 0.005;
  t.peak_flops = 1e12;
  t.peak_source = "given";
  FlopsProfilerConfig cfg;
  const std::string text = prof.render(t, cfg);
  for (const char* key : {
           "-------------------------- DeepSpeed Flops Profiler --------------------------",
           "Profile Summary at step 3:", "Notations:", "world size: ", "data parallel size: ",
           "model parallel size: ", "batch size per GPU: ", "params per GPU: ",
           "params of model = params per GPU * mp_size: ", "fwd MACs per GPU: ",
           "fwd flops per GPU: ", "fwd flops of model = fwd flops per GPU * mp_size: ",
           "fwd latency: ", "fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ",
           "bwd latency: ", "bwd FLOPS per GPU = 2 * fwd flops per GPU / bwd latency: ",
           "fwd+bwd FLOPS per GPU = 3 * fwd flops per GPU / (fwd+bwd latency): ",
           "step latency: ", "iter latency: ",
           "FLOPS per GPU = 3 * fwd flops per GPU / iter latency: ", "samples/second: ",
           "fwd+bwd flops per GPU = 3 * fwd flops per GPU: ", "peak FLOPS per GPU (given): ",
           "MFU = FLOPS per GPU / peak FLOPS per GPU: ",
           "----------------------------- Aggregated Profile per GPU -----------------------------",
           "Top 1 modules in terms of params, MACs or fwd latency at different model depths:",
           "------------------------------ Detailed Profile per GPU ------------------------------"}) {
    EXPECT_NE(text.find(key), std::string::npos) << key << "\n" << text;
  }
  // '{:<70}  {:<8}': the value starts in column 72.
  const auto pos = text.find("world size: ");
  EXPECT_EQ(text.substr(pos + 72, 9), "2       \n");
  EXPECT_NE(text.find("iter latency: "), std::string::npos);
  EXPECT_NE(text.find("35 ms"), std::string::npos);            // 10 + 20 + 5
  EXPECT_NE(text.find("228.57"), std::string::npos);           // samples/s = 4·2 / 0.035
  EXPECT_NE(text.find(number_to_string(static_cast<double>(prof.total_flops()))), std::string::npos);

  cfg.detailed = false;
  EXPECT_EQ(prof.render(t, cfg).find("Detailed Profile per GPU"), std::string::npos);
}

TEST(FlopsReport, AggregatedProfileListsTopModulesPerDepth) {
  Net net;
  FlopsProfiler prof(*net);
  prof.start();
  net->forward(torch::randn({3, 4}));
  prof.stop();
  FlopsProfilerConfig cfg;
  cfg.top_modules = 2;
  const std::string text = prof.render(ProfileTimings{}, cfg);
  // Depths 0 and 1 (DeepSpeed leaves out the deepest level with module_depth -1).
  EXPECT_NE(text.find("depth 0:\n    params      - {'Net': '146'}"), std::string::npos) << text;
  EXPECT_NE(text.find("depth 1:\n    params      - {'Block': '88', 'Linear': '58'}"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("depth 2:"), std::string::npos);
  cfg.module_depth = 3;
  EXPECT_NE(prof.render(ProfileTimings{}, cfg).find("depth 2:"), std::string::npos);
}

TEST(FlopsReport, WritesOutputFileAndMeasuresPeak) {
  const double peak = measure_gemm_peak_flops(128, 2);
  EXPECT_GT(peak, 1e6);
  torch::nn::Linear fc(8, 8);
  FlopsProfiler prof(*fc);
  prof.start();
  fc(torch::randn({4, 8}));
  prof.stop();
  const auto dir = std::filesystem::temp_directory_path() / "ds_flops_profiler_test" / "sub";
  std::filesystem::remove_all(dir.parent_path());
  FlopsProfilerConfig cfg;
  cfg.output_file = (dir / "profile.txt").string();
  ProfileTimings t;
  t.peak_flops = peak;
  t.peak_source = "measured fp32 GEMM 128x128";
  prof.print(t, cfg);
  std::ifstream in(*cfg.output_file);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("DeepSpeed Flops Profiler"), std::string::npos);
  EXPECT_NE(ss.str().find("peak FLOPS per GPU (measured fp32 GEMM 128x128): "), std::string::npos);
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace ds::profiling
