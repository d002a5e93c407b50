#include "offload/param_swapper.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "aio/nvme_path.h"
#include "util/error.h"

namespace ds::offload {
namespace {

using Clock = std::chrono::steady_clock;

double param_seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

ParamSwapper::ParamSwapper(aio::AsyncIo& io, ParamSwapperOptions options)
    : io_(io),
      opts_(std::move(options)),
      dir_(opts_.nvme_path, 3, opts_.rank, opts_.config_key + ".nvme_path", opts_.dtype_name + "params") {
  DS_ASSERT(opts_.names.size() == opts_.shard_numel.size(), "param swapper: one name per shard");
  uint64_t disk = 0;
  for (size_t id = 0; id < size(); ++id) {
    const int64_t n = opts_.shard_numel[id];
    if (n > opts_.buffer_size)
      throw ConfigError(opts_.config_key + ".buffer_size",
                        std::to_string(opts_.buffer_size) + " elements is smaller than the shard of " + opts_.names[id] +
                            " (" + std::to_string(n) + " elements); every swapped shard must fit one buffer, as in "
                            "DeepSpeed: raise buffer_size to at least " + std::to_string(n));
    disk += static_cast<uint64_t>(aio::align_up(shard_bytes(id)));
  }
  aio::check_free_space(dir_.path(), disk, opts_.config_key + ".nvme_path");
}

ParamSwapper::~ParamSwapper() {
  try {
    io_.wait_all();
  } catch (...) {  // destructors never throw; a failed write of a run being torn down is moot
  }
}

aio::IoHandle ParamSwapper::read_async(size_t id, void* dst) {
  // Requests on one file must not overlap in flight: finish this shard's pending write first.
  while (std::any_of(writes_.begin(), writes_.end(), [id](const Write& w) { return w.id == id; })) wait_oldest_write();
  stats_.bytes_read += shard_bytes(id);
  stats_.shard_reads += 1;
  return io_.submit_read(file(id), dst, shard_bytes(id), 0);
}

void ParamSwapper::wait_read(aio::IoHandle handle) {
  const auto t0 = Clock::now();
  io_.wait(handle);
  stats_.read_wait_s += param_seconds_since(t0);
}

void ParamSwapper::write_async(size_t id, aio::AlignedBuffer buffer) {
  DS_ASSERT(buffer.size() >= shard_bytes(id), "param swapper: write buffer smaller than the shard");
  const int64_t bound = std::max<int64_t>(1, opts_.buffer_count) * opts_.buffer_size * opts_.element_size;
  while (!writes_.empty() && inflight_bytes_ + shard_bytes(id) > bound) wait_oldest_write();
  while (std::any_of(writes_.begin(), writes_.end(), [id](const Write& w) { return w.id == id; })) wait_oldest_write();
  aio::IoHandle h = io_.submit_write(file(id), buffer.data(), shard_bytes(id), 0);
  inflight_bytes_ += shard_bytes(id);
  stats_.bytes_written += shard_bytes(id);
  stats_.shard_writes += 1;
  writes_.push_back({id, h, std::move(buffer)});
}

void ParamSwapper::write(size_t id, const void* src) {
  aio::AlignedBuffer b = write_buffer(id);
  if (shard_bytes(id) > 0) std::memcpy(b.data(), src, static_cast<size_t>(shard_bytes(id)));
  write_async(id, std::move(b));
  flush();
}

void ParamSwapper::wait_oldest_write() {
  Write w = std::move(writes_.front());
  writes_.pop_front();
  inflight_bytes_ -= shard_bytes(w.id);
  const auto t0 = Clock::now();
  try {
    io_.wait(w.handle);
  } catch (...) {
    stats_.write_wait_s += param_seconds_since(t0);
    // The failed shard's file is now unreliable; the others' writes still land before we rethrow.
    while (!writes_.empty()) {
      try {
        io_.wait(writes_.front().handle);
      } catch (...) {
      }
      inflight_bytes_ -= shard_bytes(writes_.front().id);
      writes_.pop_front();
    }
    throw;
  }
  stats_.write_wait_s += param_seconds_since(t0);
}

void ParamSwapper::flush() {
  while (!writes_.empty()) wait_oldest_write();
}

}  // namespace ds::offload
