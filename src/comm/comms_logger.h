// CommsLogger: DeepSpeed's communication logger ("comms_logger" in the config; deepspeed.comm's
// log_summary). Every collective a communicator completes is recorded under its operation name (with
// debug, "<op> | [Caller: <tag>]") and message size: count, latency, and DeepSpeed's algorithmic and
// bus bandwidths (nccl-tests' model). Process-wide like DeepSpeed's, since a run's collectives go
// through many communicators (the topology's groups, ZeRO's own); each collective's bandwidth uses
// the size of the group it ran on (DeepSpeed uses the world's for every group).
//
// Message size is DeepSpeed's: the tensor passed in (an all-gather's per-rank input, a
// reduce-scatter's whole input). Latency is the collective's own running time, from when it started
// on the wire to when it completed on this rank, in ms.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "comm/types.h"
#include "config/monitor_config.h"

namespace ds::comm {

class Communicator;

// DeepSpeed's calc_bw_log: (algbw, busbw) in Gbit/s of one collective of `msg_bytes` over `world`.
struct Bandwidth {
  double algbw_gbps = 0, busbw_gbps = 0;
};
Bandwidth comm_bandwidth(OpKind op, int64_t msg_bytes, int world, double latency_ms);

// DeepSpeed's trim_mean: the mean after dropping round(n * fraction) values at each end (0 if empty).
double trimmed_mean(std::vector<double> values, double fraction);

// One row of the summary: an operation (record name) at one message size.
struct CommsOpSummary {
  std::string name;
  int64_t msg_bytes = 0;
  int64_t count = 0;
  double total_latency_ms = 0, avg_latency_ms = 0;  // the averages trim 10% at each end, as DeepSpeed's
  double algbw_avg_gbps = 0, busbw_avg_gbps = 0;
};

class CommsLogger {
 public:
  static CommsLogger& global();

  // The config section as read (DeepSpeed's prof_ops spellings, e.g. all_gather_into_tensor, count too).
  void configure(CommsLoggerConfig options);
  bool enabled() const;
  // A collective of this communicator completed (called by Communicator on whichever thread ran it).
  // `payload_bytes` is the collective log's (an all-gather's gathered output).
  void record(OpKind op, std::string_view tag, int64_t payload_bytes, int world, double seconds);

  // DeepSpeed's start/stop_profiling_comms and start/stop_profiling_op.
  void start_profiling_comms();
  void stop_profiling_comms();
  void start_profiling_ops(const std::vector<std::string>& ops);
  void stop_profiling_ops(const std::vector<std::string>& ops);

  // Rows by record name (first-use order), message sizes ascending.
  std::vector<CommsOpSummary> summary() const;
  // DeepSpeed's log_summary table: "Comm. Op  Message Size  Count  Total Latency(ms) ...".
  std::string format_summary() const;
  // DeepSpeed's log_summary(show_straggler=True) table ("Breakdown with straggler effect"), a
  // collective over `world`: per row, the sum and trimmed mean of each call's latency at its
  // fastest rank (the operation itself) and of this rank's excess over it (the wait for the slowest
  // rank to arrive). Calls are matched across ranks by row and order, and only rows every rank has
  // with the same count are compared (DeepSpeed all-reduces every row and hangs when ranks ran
  // different groups' collectives); the others say so.
  std::string format_straggler_summary(Communicator& world) const;
  void reset();  // forget what was recorded (DeepSpeed's reset_data)

 private:
  struct Entry {
    int64_t count = 0;
    std::vector<double> latency_ms, algbw, busbw;
  };
  bool wanted(OpKind op, std::string_view tag) const;

  mutable std::mutex mu_;
  CommsLoggerConfig options_;
  std::vector<std::string> order_;                              // record names, first use first
  std::map<std::string, std::map<int64_t, Entry>, std::less<>> entries_;
};

// DeepSpeed's convert_size: "0B", "512.0 B", "1.5 KB", "678.86 MB" (powers of 1024, 2 decimals).
std::string convert_size(int64_t bytes);

}  // namespace ds::comm
