#include "comm/node_groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "util/error.h"

namespace ds::comm {

int NodeLayout::rank_at(int node, int local) const {
  for (size_t r = 0; r < node_of.size(); ++r)
    if (node_of[r] == node && local_of[r] == local) return int(r);
  DS_ASSERT(false, "a node layout holds every (node, local) pair");
  return -1;
}

NodeLayout node_layout(const std::vector<int>& node_ids, const std::string& key) {
  std::map<int, int> index_of;  // node id → node index, in order of first appearance (lowest rank)
  std::vector<int> count;
  NodeLayout l;
  for (int id : node_ids) {
    auto [it, fresh] = index_of.emplace(id, int(count.size()));
    if (fresh) count.push_back(0);
    l.node_of.push_back(it->second);
    l.local_of.push_back(count[size_t(it->second)]++);
  }
  l.nodes = int(count.size());
  l.per_node = count.empty() ? 0 : count[0];
  for (int c : count) {
    if (c == l.per_node) continue;
    throw ConfigError(key, fmt::format("hierarchical collectives need the same number of ranks on every node, but "
                                       "the {} ranks sit {} per node ({} nodes); launch a world that fills every "
                                       "node equally (DS_RANKS_PER_NODE sets ranks per node on one machine)",
                                       node_ids.size(), fmt::join(count, "/"), count.size()));
  }
  return l;
}

NodeGroups::NodeGroups(Communicator& group, int node, const std::string& key) : group_rank_(group.rank()) {
  std::vector<int> ids(size_t(group.size()));
  group.all_gather(ConstBuffer(&node, 1, ElemType::Int32), Buffer(ids.data(), int64_t(ids.size()), ElemType::Int32),
                   "node_ids");
  layout_ = node_layout(ids, key);
  local_ = group.split(this->node(), local_index(), "split_node_local");
  cross_ = group.split(local_index(), this->node(), "split_node_cross");
}

}  // namespace ds::comm
