// Which slots of which hosts a launch uses: DeepSpeed's --include / --exclude / --num_nodes /
// --num_gpus semantics (deepspeed/launcher/runner.py: parse_resource_filter,
// parse_inclusion_exclusion and main), kept exactly so the same strings select the same ranks.
//
// Filter syntax: NODE_SPEC[@NODE_SPEC ...], NODE_SPEC = NAME[:SLOT[,SLOT ...]]. A bare NAME means
// every slot of that host. --include builds the set from nothing, --exclude removes from the full
// pool; the two are mutually exclusive. Unknown hosts or slots are errors; hosts left with no slot
// are dropped; hosts keep hostfile order whatever order the filter names them in.
#pragma once

#include <string>
#include <vector>

#include "launcher/hostfile.h"

namespace ds::launcher {

struct HostSlots {
  std::string host;
  std::vector<int> slots;  // slot ids on that host (GPU ids in DeepSpeed), ascending
  bool operator==(const HostSlots&) const = default;
};

// The hosts and slots a launch uses, in rank order: ranks fill the first host's slots, then the next.
using ActiveResources = std::vector<HostSlots>;

// "worker-0@worker-1:0,2" → [{worker-0, []}, {worker-1, [0, 2]}] (an empty list means "all
// slots"); a host named twice merges its slots; slots come back sorted and unique. Throws ds::Error
// on malformed specs ("w:a", "w:1:2", "w:").
ActiveResources parse_node_config_list(const std::string& spec);

// Filters `hosts` by one of `include` / `exclude` (both empty: unchanged). Throws ds::Error when
// both are given, or a host or slot is not in `hosts`.
ActiveResources parse_resource_filter(const ActiveResources& hosts, const std::string& include,
                                      const std::string& exclude);

// The pool's slot counts become slot lists 0..n-1, then parse_resource_filter.
ActiveResources parse_inclusion_exclusion(const ResourcePool& pool, const std::string& include,
                                          const std::string& exclude);

// --num_nodes k keeps the first k hosts (k <= 0: all); --num_gpus g gives every kept host the slots
// 0..g-1 (g <= 0: unchanged). As in DeepSpeed, g may exceed a host's hostfile slots.
ActiveResources limit_resources(ActiveResources active, int num_nodes, int num_gpus);

// Total ranks.
int count_ranks(const ActiveResources& active);

}  // namespace ds::launcher
