// Text of DeepSpeed's flops profiler printout, string for string where DeepSpeed prints one
// (labels, the '{:<70}  {:<8}' summary lines, Python dict repr in the aggregated profile, the
// torch module repr with its two-space indentation in the detailed profile).
#include "profiling/flops_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "profiling/python_text.h"
#include "util/error.h"

namespace ds::profiling {
namespace {

// Python's f"{round(x, 2):g}".
std::string g2(double x) {
  const double r = std::round(x * 100.0) / 100.0;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", r == 0.0 ? 0.0 : r);
  return buf;
}

// '{:<70}  {:<8}'.format(label, value)
std::string line(const std::string& label, const std::string& value) {
  std::string s = label;
  if (s.size() < 70) s.append(70 - s.size(), ' ');
  s += "  " + value;
  if (value.size() < 8) s.append(8 - value.size(), ' ');
  return s + "\n";
}

// '{}% X'.format(round(100 * part / whole, 2)) with DeepSpeed's 0 for an empty whole.
std::string percent(double part, double whole) { return whole != 0 ? g2(100.0 * part / whole) : "0"; }

// The module's annotation in the detailed profile (DeepSpeed's flops_repr).
std::string flops_repr(const ModuleProfile& m, const ModuleProfile& root) {
  std::string s = params_to_string(static_cast<double>(m.params)) + " = " +
                  percent(static_cast<double>(m.params), static_cast<double>(root.params)) +
                  "% Params, " + macs_to_string(static_cast<double>(m.macs)) + " = " +
                  percent(static_cast<double>(m.macs), static_cast<double>(root.macs)) +
                  "% MACs, " + duration_to_string(m.latency_s) + " = " +
                  percent(m.latency_s, root.latency_s) + "% latency, " +
                  flops_to_string(m.latency_s > 0
                                      ? std::round(static_cast<double>(m.flops) / m.latency_s * 100) / 100
                                      : 0.0);
  if (!m.extra_repr.empty()) s += ", " + m.extra_repr;
  return s;
}

// torch.nn.Module.__repr__ with the annotation as extra_repr: "Type(annotation)" for a leaf,
// "Type(\n  annotation\n  (child): ...\n)" otherwise; children indented by two spaces.
std::string module_repr(const ModuleProfile& m, const ModuleProfile& root) {
  const std::string extra = flops_repr(m, root);
  if (m.children.empty()) return m.type_name + "(" + extra + ")";
  std::string s = m.type_name + "(\n  " + extra;
  for (const auto& child : m.children) {
    std::string sub = module_repr(child, root);
    std::string indented;  // _addindent(sub, 2): every line but the first
    for (char c : sub) {
      indented += c;
      if (c == '\n') indented += "  ";
    }
    s += "\n  (" + child.name + "): " + indented;
  }
  return s + "\n)";
}

struct TypeTotals {
  std::string type_name;
  double macs = 0, params = 0, latency = 0;
};

// DeepSpeed's walk_module: per depth, totals per class name in first-seen order.
void walk(const ModuleProfile& m, size_t depth, std::vector<std::vector<TypeTotals>>& info) {
  if (info.size() <= depth) info.resize(depth + 1);
  auto& row = info[depth];
  auto it = std::find_if(row.begin(), row.end(),
                         [&](const TypeTotals& t) { return t.type_name == m.type_name; });
  if (it == row.end()) {
    row.push_back(TypeTotals{m.type_name});
    it = row.end() - 1;
  }
  it->macs += static_cast<double>(m.macs);
  it->params += static_cast<double>(m.params);
  it->latency += m.latency_s;
  for (const auto& child : m.children) walk(child, depth + 1, info);
}

// {'Linear': '1.2 GMACs', ...}: the top `k` by `key`, largest first, ties in first-seen order.
template <typename Key, typename Fmt>
std::string top_dict(std::vector<TypeTotals> row, size_t k, Key key, Fmt fmt) {
  std::stable_sort(row.begin(), row.end(),
                   [&](const TypeTotals& a, const TypeTotals& b) { return key(a) > key(b); });
  std::string s = "{";
  for (size_t i = 0; i < std::min(k, row.size()); ++i) {
    s += (i ? ", '" : "'") + row[i].type_name + "': '" + fmt(key(row[i])) + "'";
  }
  return s + "}";
}

std::string aggregated(const ModuleProfile& root, const FlopsProfilerConfig& config) {
  std::vector<std::vector<TypeTotals>> info;
  walk(root, 0, info);
  // DeepSpeed prints depths [0, module_depth) and, for -1, [0, deepest): the deepest level of
  // leaves is never listed. Kept as is so the output matches.
  const int64_t available = static_cast<int64_t>(info.size());
  int64_t depth = config.module_depth == -1 ? available - 1 : config.module_depth;
  depth = std::clamp<int64_t>(depth, 0, available);
  const size_t k = static_cast<size_t>(std::max<int64_t>(config.top_modules, 0));
  std::string s = "Top " + std::to_string(config.top_modules) +
                  " modules in terms of params, MACs or fwd latency at different model depths:\n";
  for (int64_t d = 0; d < depth; ++d) {
    const auto& row = info[static_cast<size_t>(d)];
    s += "depth " + std::to_string(d) + ":\n";
    s += "    params      - " +
         top_dict(row, k, [](const TypeTotals& t) { return t.params; }, params_to_string) + "\n";
    s += "    MACs        - " +
         top_dict(row, k, [](const TypeTotals& t) { return t.macs; }, macs_to_string) + "\n";
    s += "    fwd latency - " +
         top_dict(row, k, [](const TypeTotals& t) { return t.latency; }, duration_to_string) + "\n";
  }
  return s;
}

std::string summary(const ModuleProfile& root, const ProfileTimings& t,
                    const FlopsProfilerConfig& config) {
  const double flops = static_cast<double>(root.flops);
  const double mp = static_cast<double>(t.has_engine ? t.mp_world_size : 1);
  std::string s;
  s += "\n-------------------------- DeepSpeed Flops Profiler --------------------------\n";
  s += "Profile Summary at step " + std::to_string(t.profile_step) + ":\n";
  s += "Notations:\n"
       "data parallel size (dp_size), model parallel size(mp_size),\n"
       "number of parameters (params), number of multiply-accumulate operations(MACs),\n"
       "number of floating-point operations (flops), floating-point operations per second (FLOPS),\n"
       "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
       "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n";
  if (t.has_engine) {
    s += line("world size: ", std::to_string(t.world_size));
    s += line("data parallel size: ", std::to_string(t.dp_world_size));
    s += line("model parallel size: ", std::to_string(t.mp_world_size));
    s += line("batch size per GPU: ", std::to_string(t.micro_batch_size));
  }
  const double params = static_cast<double>(root.params);
  s += line("params per GPU: ", params_to_string(params));
  s += line("params of model = params per GPU * mp_size: ", params_to_string(params * mp));
  s += line("fwd MACs per GPU: ", macs_to_string(static_cast<double>(root.macs)));
  s += line("fwd flops per GPU: ", number_to_string(flops));
  s += line("fwd flops of model = fwd flops per GPU * mp_size: ", number_to_string(flops * mp));
  const double fwd = t.fwd_latency_s.value_or(root.latency_s);
  auto rate = [](double work, double seconds) { return seconds > 0 ? work / seconds : 0.0; };
  s += line("fwd latency: ", duration_to_string(fwd));
  s += line("fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ", flops_to_string(rate(flops, fwd)));
  double achieved = rate(flops, fwd);  // what MFU compares with the peak
  const double bwd_factor = 2.0 + config.recompute_fwd_factor;
  const std::string f_bwd = g2(bwd_factor), f_all = g2(bwd_factor + 1.0);
  if (t.bwd_latency_s && t.step_latency_s) {
    const double bwd = *t.bwd_latency_s, step = *t.step_latency_s, iter = fwd + bwd + step;
    s += line("bwd latency: ", duration_to_string(bwd));
    s += line("bwd FLOPS per GPU = " + f_bwd + " * fwd flops per GPU / bwd latency: ",
              flops_to_string(rate(bwd_factor * flops, bwd)));
    s += line("fwd+bwd FLOPS per GPU = " + f_all + " * fwd flops per GPU / (fwd+bwd latency): ",
              flops_to_string(rate((bwd_factor + 1) * flops, fwd + bwd)));
    s += line("step latency: ", duration_to_string(step));
    s += line("iter latency: ", duration_to_string(iter));
    achieved = rate((bwd_factor + 1) * flops, iter);
    s += line("FLOPS per GPU = " + f_all + " * fwd flops per GPU / iter latency: ",
              flops_to_string(achieved));
    const double samples = static_cast<double>(t.micro_batch_size * t.world_size);
    s += line("samples/second: ",
              ds::python_float_repr(std::round(rate(samples, iter) * 100.0) / 100.0));
  }
  // deepspeed.cpp's additions.
  s += line("fwd+bwd flops per GPU = " + f_all + " * fwd flops per GPU: ",
            number_to_string((bwd_factor + 1) * flops));
  if (t.peak_flops > 0) {
    s += line("peak FLOPS per GPU (" + (t.peak_source.empty() ? "given" : t.peak_source) + "): ",
              flops_to_string(t.peak_flops));
    s += line("MFU = FLOPS per GPU / peak FLOPS per GPU: ", g2(100.0 * achieved / t.peak_flops) + "%");
  }
  return s;
}

}  // namespace

std::string number_to_string(double x) {
  double magnitude = 1;
  const char* unit = "";
  if (x >= 1e12) { magnitude = 1e12; unit = "T"; }
  else if (x >= 1e9) { magnitude = 1e9; unit = "G"; }
  else if (x >= 1e6) { magnitude = 1e6; unit = "M"; }
  else if (x >= 1e3) { magnitude = 1e3; unit = "K"; }
  else if (x >= 1 || x == 0) { magnitude = 1; unit = ""; }
  else if (x >= 1e-3) { magnitude = 1e-3; unit = "m"; }
  else { magnitude = 1e-6; unit = "u"; }
  return g2(x / magnitude) + " " + unit;
}

std::string macs_to_string(double macs) { return number_to_string(macs) + "MACs"; }
std::string flops_to_string(double flops) { return number_to_string(flops) + "FLOPS"; }
std::string duration_to_string(double seconds) { return number_to_string(seconds) + "s"; }

std::string params_to_string(double params) {
  std::string s = number_to_string(params);
  std::replace(s.begin(), s.end(), 'G', 'B');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string render_profile(const ModuleProfile& root, const ProfileTimings& timings,
                           const FlopsProfilerConfig& config) {
  std::string s = summary(root, timings, config);
  s += "\n----------------------------- Aggregated Profile per GPU -----------------------------\n";
  s += aggregated(root, config);
  if (config.detailed) {
    s += "\n------------------------------ Detailed Profile per GPU ------------------------------\n";
    s += "Each module profile is listed after its name in the following order: \n"
         "params, percentage of total params, MACs, percentage of total MACs, fwd latency, "
         "percentage of total fwd latency, fwd FLOPS\n";
    s += "\nNote: 1. A module can have torch.nn.module or torch.nn.functional to compute logits "
         "(e.g. CrossEntropyLoss). They are not counted as submodules, thus not to be printed "
         "out. However they make up the difference between a parent's MACs (or latency) and the "
         "sum of its submodules'.\n"
         "2. Number of floating-point operations is a theoretical estimation, thus FLOPS computed "
         "using that could be larger than the maximum system throughput.\n"
         "3. The fwd latency listed in the top module's profile is the sum of the operators "
         "deepspeed.cpp attributed to it, thus it's less than the fwd latency shown above which "
         "is captured by the engine.\n\n";
    s += module_repr(root, root) + "\n";
  }
  s += "------------------------------------------------------------------------------\n";
  return s;
}

void write_profile(const std::string& text, const FlopsProfilerConfig& config) {
  if (!config.output_file || config.output_file->empty()) {
    std::cout << text << std::flush;
    return;
  }
  const std::filesystem::path path(*config.output_file);
  std::error_code ec;
  const auto dir = std::filesystem::absolute(path, ec).parent_path();
  if (!ec && !dir.empty()) std::filesystem::create_directories(dir, ec);
  DS_CHECK(!ec, IoError,
           "flops_profiler.output_file: cannot create the directory of \"" + path.string() +
               "\": " + ec.message() + " (point output_file at a writable location)");
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.flush();
  DS_CHECK(out.good(), IoError,
           "flops_profiler.output_file: cannot write \"" + path.string() +
               "\" (point output_file at a writable location)");
}

}  // namespace ds::profiling
