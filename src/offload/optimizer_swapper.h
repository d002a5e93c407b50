// The NVMe optimizer-state swapper (ZeRO-Infinity's offload_optimizer.device = "nvme"): one
// rank's fp32 optimizer states (master weights + the optimizer's moments) live in swap files,
// sub-group by sub-group, and come into RAM only for that sub-group's update:
//
//   for each sub-group k:  read k+1 (prefetch)  ||  caller updates k  ||  write k-1
//
// through a fixed set of 4 KiB-aligned buffers. A "buffer" holds one state of one sub-group, as
// in DeepSpeed (buffer_count counts tensors, not sub-groups), so a sub-group in flight takes
// num_states buffers and the pipeline needs:
//   no pipelining: 1 sub-group  (read k, update, write k, wait)
//   pipeline_read or pipeline_write alone: 2 sub-groups;  both: 3 sub-groups.
// Never more than that many buffers are allocated; too small a buffer_count is a ConfigError.
// The gradients are not swapped here: the caller holds sub-group k's gradient in RAM.
// Plain C++ (no LibTorch): the states are float spans; one Adam kernel serves them all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aio/aio_engine.h"
#include "aio/aligned_buffer.h"
#include "config/zero_config.h"
#include "offload/swap_files.h"

namespace ds::offload {

struct SwapLayout {
  std::vector<int64_t> sub_group_numel;  // fp32 elements per sub-group (every state has as many)
  std::vector<std::string> state_names;  // one per fp32 state, e.g. {"fp32", "exp_avg", "exp_avg_sq"}

  int num_states() const { return static_cast<int>(state_names.size()); }
  // Names "state0", "state1", ...: Adam/AdamW 3 (master + 2 moments), Adagrad/Lion 2, SGD 1-2.
  static SwapLayout with_states(std::vector<int64_t> sub_group_numel, int num_states);
};

struct SwapperOptions {
  std::string nvme_path;
  int zero_stage = 3;
  int rank = 0;                  // global rank: the folder is rank<rank>
  int64_t buffer_count = 4;      // offload_optimizer.buffer_count
  bool pipeline_read = false;    // prefetch sub-group k+1 while k is updated
  bool pipeline_write = false;   // write sub-group k-1 back while k is updated
  SwapLayout layout;
  std::string config_key = "zero_optimization.offload_optimizer";  // prefix for error messages
};

// The options for `zero_optimization.offload_optimizer` (device "nvme"; nvme_path must be set).
SwapperOptions swapper_options(const OffloadOptimizerConfig& c, int zero_stage, int rank,
                               SwapLayout layout);

// Counters for the per-phase report. Wait times are what the caller's thread spent blocked on
// I/O; with pipelining they are the part of the I/O the update did not hide.
struct SwapStats {
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t sub_group_reads = 0;
  int64_t sub_group_writes = 0;
  double read_wait_s = 0;
  double write_wait_s = 0;
  int64_t max_live_buffers = 0;  // most buffers holding a sub-group at once
};

class OptimizerSwapper {
 public:
  using UpdateFn = std::function<void(int64_t sub_group, std::span<float* const> states)>;

  // Creates <nvme_path>/zero_stage_<S>/optimizer/rank<R>/ (emptied), checks free space for every
  // state of every sub-group, allocates the buffers. Throws ConfigError (path, space,
  // buffer_count) or IoError.
  OptimizerSwapper(aio::AsyncIo& io, SwapperOptions options);
  ~OptimizerSwapper();  // waits for its I/O (errors dropped), removes its swap files
  OptimizerSwapper(const OptimizerSwapper&) = delete;
  OptimizerSwapper& operator=(const OptimizerSwapper&) = delete;

  int64_t num_sub_groups() const { return static_cast<int64_t>(opts_.layout.sub_group_numel.size()); }
  int num_states() const { return opts_.layout.num_states(); }
  int64_t sub_group_numel(int64_t k) const { return opts_.layout.sub_group_numel[static_cast<size_t>(k)]; }
  const std::string& directory() const { return dir_.path(); }
  std::string file_path(int64_t sub_group, int state) const;
  int64_t buffers_allocated() const { return static_cast<int64_t>(buffers_.size()); }
  int64_t buffer_bytes() const;  // bytes of one buffer (largest sub-group, 4 KiB-aligned)

  // Writes sub-group k's states (num_states pointers to numel floats; nullptr = zeros) to its
  // files and waits: initialization, and checkpoint load.
  void write_sub_group(int64_t k, std::span<const float* const> states);
  // Reads sub-group k's states into caller memory and waits: checkpoint save.
  void read_sub_group(int64_t k, std::span<float* const> states);

  // Runs `update` on every sub-group in order with its states in swap buffers (valid only during
  // the call), writing each back afterwards, pipelined as configured. Every sub-group must have
  // been written once. If `update` or an I/O fails, all I/O is drained and the error rethrown.
  void for_each_sub_group(const UpdateFn& update);

  SwapStats stats() const { return stats_; }
  void reset_stats() { stats_ = SwapStats{}; }

 private:
  enum class SlotState { Free, Reading, Updating, Writing };
  struct Slot {
    SlotState state = SlotState::Free;
    int64_t sub_group = -1;
    int64_t write_seq = 0;  // order of write issue: the oldest write is waited first
    std::vector<aio::IoHandle> pending;
  };

  int sub_groups_in_flight() const;
  Slot& acquire_slot();
  float* state_ptr(const Slot& s, int state);
  void issue(Slot& s, int64_t k, aio::IoOp op);
  void wait_slot(Slot& s);  // waits its pending I/O, adds to the read/write wait counters
  void drain() noexcept;    // waits everything, ignoring errors (error paths, destructor)
  void note_live();

  aio::AsyncIo& io_;
  SwapperOptions opts_;
  SwapDirectory dir_;
  std::vector<aio::AlignedBuffer> buffers_;  // slot i, state j -> buffers_[i·S + j]
  std::vector<Slot> slots_;
  std::vector<bool> written_;
  int64_t write_seq_ = 0;
  SwapStats stats_;
};

}  // namespace ds::offload
