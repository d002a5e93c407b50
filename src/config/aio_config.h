// The "aio" section: the async I/O engine behind NVMe offload (reference §1.7).
#pragma once

#include <cstdint>

namespace ds {

struct AioConfig {
  int64_t block_size = 1048576;      // bytes per I/O request
  int64_t queue_depth = 8;
  int64_t intra_op_parallelism = 1;  // threads per I/O op (old name "thread_count")
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;              // GPUDirect Storage: CUDA only, not supported
};

}  // namespace ds
