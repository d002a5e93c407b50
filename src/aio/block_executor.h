// What a backend does: run blocks to completion, asynchronously, calling apply_result() on each
// transfer and RequestState::block_done() once per block. Internal to ds_aio.
#pragma once

#include <vector>

#include "aio/request.h"

namespace ds::aio {

class BlockExecutor {
 public:
  virtual ~BlockExecutor() = default;
  // Queues the blocks and returns at once. The destructor runs only when no block is queued.
  virtual void execute(std::vector<Block> blocks) = 0;
};

}  // namespace ds::aio
