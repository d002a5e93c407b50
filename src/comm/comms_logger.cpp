#include "comm/comms_logger.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "comm/communicator.h"
#include "util/logging.h"

namespace ds::comm {
namespace {

// DeepSpeed's names for our operations, as prof_ops may spell them.
std::string_view canonical_op(std::string_view name) {
  if (name == "all_gather_into_tensor" || name == "all_gather_base") return "all_gather";
  if (name == "reduce_scatter_tensor" || name == "reduce_scatter_base") return "reduce_scatter";
  if (name == "all_to_all_single") return "all_to_all";
  if (name == "inference_all_reduce" || name == "all_reduce_coalesced") return "all_reduce";
  return name;
}

}  // namespace

Bandwidth comm_bandwidth(OpKind op, int64_t msg_bytes, int world, double latency_ms) {
  if (latency_ms <= 0) return {};
  const double n = world, size = double(msg_bytes);
  double tput = 0, busbw = 0;
  switch (op) {
    case OpKind::AllToAll:
    case OpKind::ReduceScatter:  // its logged size is the whole input already
      tput = size / latency_ms;
      busbw = tput * (n - 1) / n;
      break;
    case OpKind::AllGather:  // the per-rank input, scaled to the gathered whole
      tput = size * n / latency_ms;
      busbw = tput * (n - 1) / n;
      break;
    case OpKind::AllReduce:
      tput = size * 2 / latency_ms;
      busbw = size / latency_ms * (2 * (n - 1) / n);
      break;
    case OpKind::Broadcast:
    case OpKind::Reduce:
    case OpKind::Barrier:
    case OpKind::Split:
      tput = busbw = size / latency_ms;
      break;
  }
  // bytes per ms -> Gbit/s
  return {tput * 8 / 1e6, busbw * 8 / 1e6};
}

double trimmed_mean(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<int64_t>(values.size());
  const auto k = static_cast<int64_t>(std::nearbyint(double(n) * fraction));  // Python's round: half to even
  if (n - 2 * k <= 0) return 0;
  return std::accumulate(values.begin() + k, values.end() - k, 0.0) / double(n - 2 * k);
}

std::string convert_size(int64_t bytes) {
  if (bytes <= 0) return "0B";
  static constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  const int i = std::min(6, static_cast<int>(std::floor(std::log(double(bytes)) / std::log(1024.0))));
  std::string s = fmt::format("{:.2f}", double(bytes) / std::pow(1024.0, i));
  while (s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();  // Python prints 1.5, 512.0, 678.86
  return s + " " + kUnits[i];
}

CommsLogger& CommsLogger::global() {
  static CommsLogger logger;
  return logger;
}

void CommsLogger::configure(CommsLoggerConfig options) {
  std::lock_guard lock(mu_);
  options_ = std::move(options);
}

bool CommsLogger::enabled() const {
  std::lock_guard lock(mu_);
  return options_.enabled;
}

bool CommsLogger::wanted(OpKind op, std::string_view tag) const {
  if (options_.prof_all) return true;
  return std::any_of(options_.prof_ops.begin(), options_.prof_ops.end(), [&](const std::string& name) {
    return canonical_op(name) == to_string(op) || (!tag.empty() && name == tag);
  });
}

void CommsLogger::record(OpKind op, std::string_view tag, int64_t payload_bytes, int world, double seconds) {
  if (op == OpKind::Split) return;  // making a communicator, not a transfer
  std::string line;
  {
    std::lock_guard lock(mu_);
    if (!options_.enabled || !wanted(op, tag)) return;
    const int64_t msg = op == OpKind::AllGather && world > 0 ? payload_bytes / world : payload_bytes;
    const double ms = seconds * 1e3;
    const Bandwidth bw = comm_bandwidth(op, msg, world, ms);
    std::string name(to_string(op));
    if (options_.debug && !tag.empty()) name += fmt::format(" | [Caller: {}]", tag);
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      order_.push_back(name);
      it = entries_.emplace(name, std::map<int64_t, Entry>{}).first;
    }
    Entry& e = it->second[msg];
    e.count += 1;
    e.latency_ms.push_back(ms);
    e.algbw.push_back(bw.algbw_gbps);
    e.busbw.push_back(bw.busbw_gbps);
    if (options_.verbose)
      line = fmt::format("comm op: {} | time (ms): {:.2f} | msg size: {} | algbw (Gbps): {:.2f} | busbw (Gbps): {:.2f}",
                         name, ms, convert_size(msg), bw.algbw_gbps, bw.busbw_gbps);
  }
  if (!line.empty()) log::info("{}", line);
}

void CommsLogger::start_profiling_comms() {
  std::lock_guard lock(mu_);
  options_.prof_all = true;
}

void CommsLogger::stop_profiling_comms() {
  std::lock_guard lock(mu_);
  options_.prof_all = false;
}

void CommsLogger::start_profiling_ops(const std::vector<std::string>& ops) {
  std::lock_guard lock(mu_);
  for (const auto& op : ops)
    if (std::find(options_.prof_ops.begin(), options_.prof_ops.end(), op) == options_.prof_ops.end())
      options_.prof_ops.push_back(op);
}

void CommsLogger::stop_profiling_ops(const std::vector<std::string>& ops) {
  std::lock_guard lock(mu_);
  std::erase_if(options_.prof_ops, [&](const std::string& op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); });
}

std::vector<CommsOpSummary> CommsLogger::summary() const {
  std::lock_guard lock(mu_);
  std::vector<CommsOpSummary> rows;
  for (const auto& name : order_) {
    for (const auto& [msg, e] : entries_.at(name)) {
      CommsOpSummary r;
      r.name = name;
      r.msg_bytes = msg;
      r.count = e.count;
      r.total_latency_ms = std::accumulate(e.latency_ms.begin(), e.latency_ms.end(), 0.0);
      r.avg_latency_ms = trimmed_mean(e.latency_ms, 0.1);
      r.algbw_avg_gbps = trimmed_mean(e.algbw, 0.1);
      r.busbw_avg_gbps = trimmed_mean(e.busbw, 0.1);
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::string CommsLogger::format_summary() const {
  std::string out = fmt::format("{:<20}{:<20}{:<20}{:<20}{:<20}{:<20}{:<20}\n", "Comm. Op", "Message Size", "Count",
                                "Total Latency(ms)", "Avg Latency(ms)", "tput_avg (Gbps)", "busbw_avg (Gbps)");
  std::string last;
  for (const auto& r : summary()) {
    if (r.name != last) out += r.name + "\n";
    last = r.name;
    out += fmt::format("{:<20}{:<20}{:<20}{:<20.2f}{:<20.2f}{:<20.2f}{:<20.2f}\n", " ", convert_size(r.msg_bytes), r.count,
                       r.total_latency_ms, r.avg_latency_ms, r.algbw_avg_gbps, r.busbw_avg_gbps);
  }
  return out;
}

namespace {

// FNV-1a of a row's name and size: what ranks compare to find the rows they all have.
int64_t row_key(const std::string& name, int64_t msg_bytes) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&h](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (char c : name) add(static_cast<unsigned char>(c));
  for (int i = 0; i < 8; ++i) add(static_cast<unsigned char>(uint64_t(msg_bytes) >> (8 * i)));
  return int64_t(h);
}

}  // namespace

std::string CommsLogger::format_straggler_summary(Communicator& world) const {
  struct Row {
    std::string name;
    int64_t msg_bytes, key;
    std::vector<double> latency_ms;
  };
  const std::vector<CommsOpSummary> table_rows = summary();  // before this call's own collectives are recorded
  std::vector<Row> rows;  // name order, then size: the same order on every rank that has them
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, sizes] : entries_)
      for (const auto& [msg, e] : sizes) rows.push_back({name, msg, row_key(name, msg), e.latency_ms});
  }
  // Rank 0's rows and counts; each rank says which of them it has alike; the common ones are compared.
  int64_t n = int64_t(rows.size());
  world.broadcast(Buffer(&n, 1), 0, "comms_logger_straggler_rows");
  std::vector<int64_t> theirs(size_t(2 * n));
  if (world.rank() == 0)
    for (size_t i = 0; i < rows.size(); ++i) {
      theirs[2 * i] = rows[i].key;
      theirs[2 * i + 1] = int64_t(rows[i].latency_ms.size());
    }
  if (n > 0) world.broadcast(Buffer(theirs.data(), 2 * n), 0, "comms_logger_straggler_rows");
  std::vector<int32_t> common(size_t(n), 0);
  std::vector<const Row*> mine(size_t(n), nullptr);
  for (size_t i = 0; i < size_t(n); ++i)
    for (const Row& r : rows)
      if (r.key == theirs[2 * i] && int64_t(r.latency_ms.size()) == theirs[2 * i + 1]) {
        common[i] = 1;
        mine[i] = &r;
      }
  if (n > 0) world.all_reduce(Buffer(common.data(), n), ReduceOp::Min, "comms_logger_straggler_rows");
  std::vector<double> lats;
  for (size_t i = 0; i < size_t(n); ++i)
    if (common[i]) lats.insert(lats.end(), mine[i]->latency_ms.begin(), mine[i]->latency_ms.end());
  std::vector<double> fastest = lats;
  if (!fastest.empty()) world.all_reduce(Buffer(fastest.data(), int64_t(fastest.size())), ReduceOp::Min, "comms_logger_straggler");

  std::map<int64_t, std::string> line;  // by row key: the numbers for the table below
  size_t at = 0;
  for (size_t i = 0; i < size_t(n); ++i) {
    if (!common[i]) continue;
    const size_t count = mine[i]->latency_ms.size();
    std::vector<double> op(fastest.begin() + long(at), fastest.begin() + long(at + count)), wait(count);
    for (size_t k = 0; k < count; ++k) wait[k] = lats[at + k] - op[k];
    at += count;
    line[theirs[2 * i]] = fmt::format("{:<20}{:<20.2f}{:<20.2f}{:<20.2f}{:<20.2f}\n", count,
                                      std::accumulate(op.begin(), op.end(), 0.0), std::accumulate(wait.begin(), wait.end(), 0.0),
                                      trimmed_mean(op, 0.1), trimmed_mean(wait, 0.1));
  }
  std::string out = fmt::format("_______________________________\nBreakdown with straggler effect\n-------------------------------\n"
                                "{:<20}{:<20}{:<20}{:<20}{:<20}{:<20}{:<20}\n",
                                "Comm. Op", "Message Size", "Count", "Total comm lat(ms)", "Total straggler(ms)",
                                "Avg comm lat(ms)", "Avg straggler(ms)");
  std::string last;
  for (const auto& r : table_rows) {
    if (r.name != last) out += r.name + "\n";
    last = r.name;
    const auto it = line.find(row_key(r.name, r.msg_bytes));
    out += fmt::format("{:<20}{:<20}", " ", convert_size(r.msg_bytes)) +
           (it != line.end() ? it->second
                             : fmt::format("{:<20}not run alike on every rank (another group's, or another count)\n", r.count));
  }
  return out;
}

void CommsLogger::reset() {
  std::lock_guard lock(mu_);
  order_.clear();
  entries_.clear();
}

}  // namespace ds::comm
