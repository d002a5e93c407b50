// How an AioEngine moves bytes: DeepSpeed's "aio" keys (reference §1.7) plus the backend choice.
// See docs/aio.md for how each key maps onto io_uring and the thread-pool fallback.
#pragma once

#include <cstdint>
#include <string>

#include "config/aio_config.h"

namespace ds::aio {

// Auto: io_uring when the kernel allows it, else the pread/pwrite thread pool (one warning).
// The environment variable DS_AIO_BACKEND=uring|threads overrides Auto (tests, benchmarks).
enum class Backend { Auto, Uring, Threads };

struct AioOptions {
  int64_t block_size = 1048576;     // bytes per kernel request; multiple of 4 KiB
  int64_t queue_depth = 8;          // requests in flight per worker
  int64_t intra_op_parallelism = 1; // workers (each with its own ring) sharing every request
  bool single_submit = false;       // one io_uring_submit per block instead of per batch
  bool overlap_events = true;       // refill as blocks complete (false: batch, drain, repeat)
  Backend backend = Backend::Auto;

  // The "aio" section, unchanged. Validation happens in validate().
  static AioOptions from_config(const AioConfig& c);

  // Throws ConfigError naming the "aio.<key>" that is out of range.
  void validate() const;
};

std::string to_string(Backend b);  // "auto", "uring", "threads"

// Parses "auto" | "uring" | "threads" (also "io_uring", "thread"); throws ConfigError(`what`).
Backend parse_backend(const std::string& s, const std::string& what);

// `requested`, unless it is Auto and DS_AIO_BACKEND names another backend.
Backend resolve_backend(Backend requested);

}  // namespace ds::aio
