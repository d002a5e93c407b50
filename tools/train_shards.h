// ds-train --model-dir on several data-parallel ranks: which rows each rank trains in the first
// epoch, counted across the ranks, so the job says whether its shards are disjoint and cover the
// data (what torch's DistributedSampler promises; a rank reading another's rows would train on
// duplicates without any other sign).
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "data/distributed_sampler.h"

namespace ds::tools {

// One line for rank 0, e.g. "shards: 2 data-parallel ranks x 19 rows per epoch; 38 of 38 rows
// trained, 0 on more than one rank". Every rank of `dp` must call it (one all-reduce of `rows`
// int32 counters).
std::string describe_shards(const data::SampledBatches& batches, int64_t rows, comm::Communicator& dp);

}  // namespace ds::tools
