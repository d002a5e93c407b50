// The NVMe parameter swapper (ZeRO-Infinity's offload_param.device = "nvme", stage 3): each of
// this rank's 16-bit parameter shards lives in its own file,
//
//   <nvme_path>/zero_stage_3/<dtype>params/rank<R>/<parameter name>.tensor.swp
//
// (DeepSpeed's folder; its files are named by ds_id, ours by the parameter's dotted name). A shard
// is read straight into the caller's 4 KiB-aligned buffer — stage 3 reads it into its all-gather
// buffer, so there is no bounce copy — and written back from a buffer the swapper owns until the
// write lands, with at most buffer_count × buffer_size elements of writes in flight.
// DeepSpeed's rule that a swapped shard fits one buffer (shard numel <= buffer_size) is kept.
// Plain C++ (no LibTorch): shards are byte ranges.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "aio/aio_engine.h"
#include "aio/aligned_buffer.h"
#include "offload/swap_files.h"

namespace ds::offload {

struct ParamSwapperOptions {
  std::string nvme_path;
  int rank = 0;
  std::string dtype_name = "float32";  // the folder is <dtype_name>params
  int64_t element_size = 4;
  std::vector<std::string> names;      // one per shard: the file name
  std::vector<int64_t> shard_numel;    // elements per shard (with the tail padding)
  int64_t buffer_count = 5;            // offload_param.buffer_count
  int64_t buffer_size = 100000000;     // offload_param.buffer_size (elements)
  std::string config_key = "zero_optimization.offload_param";
};

struct ParamSwapStats {
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t shard_reads = 0, shard_writes = 0;
  double read_wait_s = 0, write_wait_s = 0;  // time the caller spent blocked on them
};

class ParamSwapper {
 public:
  // Validates the path (ConfigError naming <config_key>.nvme_path), the buffer size against the
  // largest shard (<config_key>.buffer_size) and the free space for every shard, locks and empties
  // the rank folder. Files are created by the first write of each shard.
  ParamSwapper(aio::AsyncIo& io, ParamSwapperOptions options);
  ~ParamSwapper();  // waits for its writes (errors dropped); the folder is removed
  ParamSwapper(const ParamSwapper&) = delete;
  ParamSwapper& operator=(const ParamSwapper&) = delete;

  size_t size() const { return opts_.shard_numel.size(); }
  int64_t shard_bytes(size_t id) const { return opts_.shard_numel[id] * opts_.element_size; }
  const std::string& directory() const { return dir_.path(); }
  std::string file(size_t id) const { return dir_.file(opts_.names[id]); }

  // Starts reading shard `id` into `dst` (4 KiB-aligned, room for align_up(shard_bytes(id))).
  // A write of the same shard still in flight is waited first.
  aio::IoHandle read_async(size_t id, void* dst);
  void wait_read(aio::IoHandle handle);
  // A buffer for shard `id`'s next write: aligned, zero-filled, shard_bytes(id) long.
  aio::AlignedBuffer write_buffer(size_t id) const { return aio::AlignedBuffer(shard_bytes(id)); }
  // Starts writing shard `id` from `buffer` (kept until the write lands). When the writes in flight
  // exceed buffer_count × buffer_size elements, the oldest are waited first.
  void write_async(size_t id, aio::AlignedBuffer buffer);
  // Writes shard `id` from any memory and waits (initialization).
  void write(size_t id, const void* src);
  // Waits for every write; throws the first failure (disk full names the file).
  void flush();
  int64_t writes_in_flight_bytes() const { return inflight_bytes_; }

  ParamSwapStats stats() const { return stats_; }
  void reset_stats() { stats_ = ParamSwapStats{}; }

 private:
  struct Write {
    size_t id;
    aio::IoHandle handle;
    aio::AlignedBuffer buffer;
  };
  void wait_oldest_write();

  aio::AsyncIo& io_;
  ParamSwapperOptions opts_;
  SwapDirectory dir_;
  std::deque<Write> writes_;
  int64_t inflight_bytes_ = 0;
  ParamSwapStats stats_;
};

}  // namespace ds::offload
