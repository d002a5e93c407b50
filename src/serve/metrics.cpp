#include "serve/metrics.h"

#include <cstdio>
#include <cstdlib>

#include "util/error.h"

namespace ds::serve {

namespace {

// The shortest text that reads back as v (0.1, not 0.10000000000000001).
std::string num(double v) {
  char b[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    if (std::strtod(b, nullptr) == v) break;
  }
  return b;
}

}  // namespace

void Metrics::counter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mu_);
  Family f;
  f.type = "counter";
  f.help = help;
  families_[name] = std::move(f);
}

void Metrics::gauge(const std::string& name, const std::string& help) {
  std::lock_guard lock(mu_);
  Family f;
  f.type = "gauge";
  f.help = help;
  families_[name] = std::move(f);
}

void Metrics::histogram(const std::string& name, const std::string& help, std::vector<double> bounds) {
  std::lock_guard lock(mu_);
  Family f;
  f.type = "histogram";
  f.help = help;
  f.bounds = std::move(bounds);
  f.buckets.assign(f.bounds.size(), 0.0);
  families_[name] = std::move(f);
}

void Metrics::add(const std::string& name, double v, const std::string& labels) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  DS_CHECK(it != families_.end(), Error, "metrics: '" + name + "' was not declared");
  it->second.values[labels] += v;
}

void Metrics::set(const std::string& name, double v, const std::string& labels) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  DS_CHECK(it != families_.end(), Error, "metrics: '" + name + "' was not declared");
  it->second.values[labels] = v;
}

void Metrics::observe(const std::string& name, double v) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  DS_CHECK(it != families_.end() && it->second.type == "histogram", Error,
           "metrics: '" + name + "' is not a declared histogram");
  Family& f = it->second;
  for (size_t i = 0; i < f.bounds.size(); ++i)
    if (v <= f.bounds[i]) {
      f.buckets[i] += 1;
      break;
    }
  f.sum += v;
  f.count += 1;
}

double Metrics::value(const std::string& name, const std::string& labels) const {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0.0;
  if (it->second.type == "histogram") return it->second.count;
  auto v = it->second.values.find(labels);
  return v == it->second.values.end() ? 0.0 : v->second;
}

std::string Metrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    if (f.type == "histogram") {
      double cumulative = 0;
      for (size_t i = 0; i < f.bounds.size(); ++i) {
        cumulative += f.buckets[i];
        out += name + "_bucket{le=\"" + num(f.bounds[i]) + "\"} " + num(cumulative) + "\n";
      }
      out += name + "_bucket{le=\"+Inf\"} " + num(f.count) + "\n";
      out += name + "_sum " + num(f.sum) + "\n" + name + "_count " + num(f.count) + "\n";
      continue;
    }
    if (f.values.empty()) out += name + " 0\n";
    for (const auto& [labels, v] : f.values) out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + num(v) + "\n";
  }
  return out;
}

}  // namespace ds::serve
