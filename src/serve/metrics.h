// A small Prometheus registry: counters, gauges and histograms (fixed buckets), optionally with
// one label set each, rendered in the text exposition format (version 0.0.4) for GET /metrics.
// Thread-safe: the engine thread and the HTTP threads update it, /metrics reads it.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ds::serve {

class Metrics {
 public:
  // `labels` is the text inside braces, e.g. `endpoint="chat",status="200"` ("" for none).
  void add(const std::string& name, double v = 1.0, const std::string& labels = "");
  void set(const std::string& name, double v, const std::string& labels = "");
  void observe(const std::string& name, double v);

  // Declare before use: the type line, the help line and (histograms) the bucket bounds.
  void counter(const std::string& name, const std::string& help);
  void gauge(const std::string& name, const std::string& help);
  void histogram(const std::string& name, const std::string& help, std::vector<double> bounds);

  double value(const std::string& name, const std::string& labels = "") const;
  std::string render() const;

 private:
  struct Family {
    std::string type, help;
    std::map<std::string, double> values;  // by label text
    std::vector<double> bounds;            // histograms
    std::vector<double> buckets;           // per bound, not cumulative
    double sum = 0, count = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

}  // namespace ds::serve
