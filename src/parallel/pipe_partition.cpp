#include "parallel/pipe_partition.h"

#include <fmt/format.h>

#include <limits>
#include <regex>

#include "util/error.h"

namespace ds::parallel {

std::vector<int> partition_uniform(int num_items, int num_parts) {
  DS_CHECK(num_parts >= 1 && num_items >= 0, Error,
           fmt::format("partition_uniform: {} items into {} parts", num_items, num_parts));
  std::vector<int> parts(size_t(num_parts) + 1, 0);
  if (num_items <= num_parts) {
    for (int p = 0; p <= num_parts; ++p) parts[size_t(p)] = std::min(p, num_items);
    return parts;
  }
  const int chunk = num_items / num_parts, residual = num_items % num_parts;
  for (int p = 0; p <= num_parts; ++p) parts[size_t(p)] = p * chunk + std::min(p, residual);
  return parts;
}

std::vector<int> partition_balanced(const std::vector<double>& weights, int num_parts) {
  DS_CHECK(num_parts >= 1, Error, fmt::format("partition_balanced: {} parts", num_parts));
  for (double w : weights) DS_CHECK(w >= 0, Error, fmt::format("partition_balanced: negative weight {}", w));
  const int n = int(weights.size()), m = num_parts;
  if (n <= m) return partition_uniform(n, m);
  // cost[i][j]: the best (max - min) over splits of the first i items into j parts; hi/lo its parts'
  // heaviest and lightest; cut[i][j] where its last part starts. Unreached cells are +inf, and an
  // inf cost still records its cut (DeepSpeed compares with >=), which only a finite one overrides.
  constexpr double inf = std::numeric_limits<double>::infinity();
  const size_t W = size_t(m) + 1;
  std::vector<double> hi((size_t(n) + 1) * W, inf), lo(hi.size(), inf), cost(hi.size(), inf);
  std::vector<int> cut(hi.size(), 0);
  auto at = [W](int i, int j) { return size_t(i) * W + size_t(j); };
  std::vector<double> prefix(size_t(n) + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[size_t(i) + 1] = prefix[size_t(i)] + weights[size_t(i)];
  hi[at(0, 0)] = 0;
  cost[at(0, 0)] = 0;
  for (int i = 1; i <= n; ++i)
    for (int j = 1; j <= std::min(i, m); ++j)
      for (int k = 0; k < i; ++k) {
        const double part = prefix[size_t(i)] - prefix[size_t(k)];
        const double h = std::max(hi[at(k, j - 1)], part), l = std::min(lo[at(k, j - 1)], part);
        const double c = h - l;
        if (cost[at(i, j)] >= c) {
          cost[at(i, j)] = c;
          hi[at(i, j)] = h;
          lo[at(i, j)] = l;
          cut[at(i, j)] = k;
        }
      }
  std::vector<int> parts(size_t(m) + 1);
  parts[size_t(m)] = n;
  for (int j = m; j >= 1; --j) parts[size_t(j) - 1] = cut[at(parts[size_t(j)], j)];
  return parts;
}

std::vector<int> partition_layers(std::string_view method, const std::vector<PartitionItem>& layers, int num_stages) {
  std::vector<double> weights;
  const std::string m(method);
  if (m == "parameters") {
    for (const auto& l : layers) weights.push_back(double(l.num_params));
  } else if (m == "uniform") {
    return partition_uniform(int(layers.size()), num_stages);
  } else if (m.rfind("type:", 0) == 0) {
    std::regex pattern;
    try {
      pattern = std::regex(m.substr(5), std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
      throw ConfigError("pipeline.partition", fmt::format("\"{}\" is not a valid regular expression: {}", m, e.what()));
    }
    bool any = false;
    for (const auto& l : layers) {
      const bool hit = std::regex_search(l.name, pattern);
      weights.push_back(hit ? 1.0 : 0.0);
      any = any || hit;
    }
    if (!any)
      throw ConfigError("pipeline.partition", fmt::format("\"{}\" matches no layer name (the first is \"{}\")", m,
                                                          layers.empty() ? "" : layers.front().name));
  } else {
    throw ConfigError("pipeline.partition",
                      fmt::format("\"{}\" is not a partition method: use \"parameters\", \"uniform\" or \"type:<regex>\" "
                                  "(\"profile\" is not implemented, in DeepSpeed either)", m));
  }
  return partition_balanced(weights, num_stages);
}

}  // namespace ds::parallel
