#include "train_shards.h"

#include <fmt/format.h>

#include <vector>

namespace ds::tools {

std::string describe_shards(const data::SampledBatches& batches, int64_t rows, comm::Communicator& dp) {
  std::vector<int32_t> ranks_per_row(static_cast<size_t>(rows), 0);  // this rank's rows as 0/1, then summed
  int64_t mine = 0;
  for (int64_t k = 0; k < batches.batches_per_epoch(); ++k)
    for (int64_t row : batches.batch(k)) {
      ranks_per_row[static_cast<size_t>(row)] = 1;
      ++mine;
    }
  dp.all_reduce(comm::Buffer(ranks_per_row.data(), rows), comm::ReduceOp::Sum, "ds_train_shards");
  int64_t covered = 0, shared = 0;
  for (int32_t n : ranks_per_row) {
    covered += n > 0;
    shared += n > 1;
  }
  return fmt::format("shards: {} data-parallel ranks x {} rows per epoch; {} of {} rows trained, {} on more than one rank",
                     dp.size(), mine, covered, rows, shared);
}

}  // namespace ds::tools
