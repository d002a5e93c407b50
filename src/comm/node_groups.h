// NodeGroups: a communicator's ranks as nodes of equal size, for hierarchical collectives (ZeRO++
// qgZ): `local` joins the ranks of one node, `cross` the ranks with the same index inside their
// node, one per node (DeepSpeed's local_{i} and global_{j} all-to-all groups). Which node a rank is
// on comes from the caller (the launcher's ranks per node; on one machine a configured count
// simulates several nodes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace ds::comm {

struct NodeLayout {
  int nodes = 1, per_node = 1;
  std::vector<int> node_of, local_of;  // per group rank: its node and its index within the node
  // The group rank of the `local`-th rank of node `node` (nodes in order of their lowest rank).
  int rank_at(int node, int local) const;
};

// The layout of ranks whose nodes (any ids) are `node_ids`, by group rank; throws ds::ConfigError
// (key `key`) when the nodes hold different numbers of ranks.
NodeLayout node_layout(const std::vector<int>& node_ids, const std::string& key);

class NodeGroups {
 public:
  // Collective over `group` (an all-gather of node ids and two splits). `node`: this rank's node id.
  NodeGroups(Communicator& group, int node, const std::string& key);
  const NodeLayout& layout() const { return layout_; }
  int node() const { return layout_.node_of[size_t(group_rank_)]; }
  int local_index() const { return layout_.local_of[size_t(group_rank_)]; }
  Communicator& local() const { return *local_; }  // rank = local_index()
  Communicator& cross() const { return *cross_; }  // rank = node()

 private:
  int group_rank_ = 0;
  NodeLayout layout_;
  std::unique_ptr<Communicator> local_, cross_;
};

}  // namespace ds::comm
