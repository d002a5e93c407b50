// Which hosts an elastic (re)start uses: the largest world size the elasticity section allows on
// the slots of the hosts alive now (docs/elasticity.md). Plain data in and out, so that the
// choice is unit-tested without processes.
#pragma once

#include <string>
#include <vector>

#include "config/elasticity.h"
#include "launcher/resource_filter.h"

namespace ds::launcher {

struct ElasticChoice {
  ActiveResources resources;  // hosts and slots to start ranks on, hostfile order
  int64_t world = 0;          // ranks in all
  ElasticBatch batch;         // for its data-parallel world (world / ranks_per_replica)
};

// Takes hosts from `alive` in order (at most `max_nodes` of them when > 0) and picks the largest
// world W <= their slots, a multiple of job.ranks_per_replica, whose data-parallel size the
// section accepts; ranks fill whole hosts first, the last one possibly in part. Throws ds::Error
// naming the sizes when none fits, or when fewer than `min_nodes` hosts (> 0) would be used.
ElasticChoice choose_elastic_world(const ActiveResources& alive, const ElasticJob& job, int min_nodes, int max_nodes);

// The --include spec that selects exactly `resources` ("worker-0@worker-1:0,1").
std::string include_spec(const ActiveResources& resources);

// "worker-0, worker-1"
std::string host_names(const ActiveResources& resources);

}  // namespace ds::launcher
