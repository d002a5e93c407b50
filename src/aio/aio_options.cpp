#include "aio/aio_options.h"

#include <cstdlib>

#include "aio/aligned_buffer.h"
#include "util/error.h"

namespace ds::aio {

AioOptions AioOptions::from_config(const AioConfig& c) {
  AioOptions o;
  o.block_size = c.block_size;
  o.queue_depth = c.queue_depth;
  o.intra_op_parallelism = c.intra_op_parallelism;
  o.single_submit = c.single_submit;
  o.overlap_events = c.overlap_events;
  return o;
}

void AioOptions::validate() const {
  // O_DIRECT moves whole logical blocks: a block size off the 4 KiB grid would fail with EINVAL
  // deep in the kernel, so it is refused here with the key's name instead.
  if (block_size <= 0 || !is_aligned(block_size))
    throw ConfigError("aio.block_size",
                      std::to_string(block_size) +
                          " must be a positive multiple of 4096 bytes (O_DIRECT moves whole 4 KiB "
                          "blocks); DeepSpeed's default is 1048576");
  if (queue_depth < 1 || queue_depth > 4096)
    throw ConfigError("aio.queue_depth", std::to_string(queue_depth) + " must be in [1, 4096]");
  if (intra_op_parallelism < 1 || intra_op_parallelism > 64)
    throw ConfigError("aio.intra_op_parallelism",
                      std::to_string(intra_op_parallelism) + " must be in [1, 64]");
}

std::string to_string(Backend b) {
  switch (b) {
    case Backend::Auto: return "auto";
    case Backend::Uring: return "uring";
    case Backend::Threads: return "threads";
  }
  return "?";
}

Backend parse_backend(const std::string& s, const std::string& what) {
  if (s == "auto" || s.empty()) return Backend::Auto;
  if (s == "uring" || s == "io_uring") return Backend::Uring;
  if (s == "threads" || s == "thread") return Backend::Threads;
  throw ConfigError(what, "\"" + s + "\" is not a backend (use auto, uring or threads)");
}

Backend resolve_backend(Backend requested) {
  if (requested != Backend::Auto) return requested;
  const char* env = std::getenv("DS_AIO_BACKEND");
  return env ? parse_backend(env, "DS_AIO_BACKEND") : Backend::Auto;
}

}  // namespace ds::aio
