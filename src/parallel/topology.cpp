// Topology: the sizes check, the grid, and one communicator per group (see topology.h).
#include "parallel/topology.h"

#include <algorithm>

#include "comm/single_communicator.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

// Every rank must build the same grid, or the splits below would not line up (a hang, or groups
// that disagree). One all_gather turns a mismatch into the same error on every rank.
void check_same_sizes(comm::Communicator& world, const TopologySizes& sizes) {
  if (world.size() == 1) return;
  constexpr int kFields = 4;
  const int64_t mine[kFields] = {sizes.pipe, sizes.tensor, sizes.sequence, sizes.expert};
  std::vector<int64_t> all(size_t(kFields) * size_t(world.size()));
  world.all_gather(comm::ConstBuffer(mine, kFields), comm::Buffer(all.data(), int64_t(all.size())),
                   "topology_sizes");
  auto sizes_of = [&](int r) {
    const int64_t* v = all.data() + size_t(r) * kFields;
    return TopologySizes{int(v[0]), int(v[1]), int(v[2]), int(v[3])};
  };
  for (int r = 1; r < world.size(); ++r)
    for (int i = 0; i < kFields; ++i)
      if (all[size_t(r) * kFields + size_t(i)] != all[size_t(i)])
        throw ConfigError("", "the ranks were given different parallel sizes: rank 0 has " + describe(sizes_of(0)) +
                                  ", rank " + std::to_string(r) + " has " + describe(sizes_of(r)) +
                                  " (every rank must build the topology from the same config)");
}

TopologyShape checked_shape(comm::Communicator& world, const TopologySizes& sizes) {
  check_same_sizes(world, sizes);
  return resolve_shape(world.size(), sizes);
}

// The partition as a set of sets: lists of different kinds may be ordered differently.
std::vector<std::vector<int>> canonical(std::vector<std::vector<int>> lists) {
  std::sort(lists.begin(), lists.end());
  return lists;
}

}  // namespace

std::string_view to_string(Group g) noexcept {
  switch (g) {
    case Group::Pipe: return "pipe";
    case Group::Data: return "data";
    case Group::Sequence: return "sequence";
    case Group::Model: return "model";
    case Group::SequenceData: return "sequence_data";
    case Group::Expert: return "expert";
    case Group::ExpertData: return "expert_data";
  }
  return "?";
}

const std::vector<std::string>& Topology::grid_axes() {
  static const std::vector<std::string> axes = {"pipe", "data", "sequence", "model"};
  return axes;
}

const std::vector<std::string>& Topology::expert_axes() {
  static const std::vector<std::string> axes = {"pipe", "expert_data", "expert", "sequence", "model"};
  return axes;
}

Topology::Topology(std::shared_ptr<comm::Communicator> world, const TopologySizes& sizes)
    : world_(std::move(world)),
      rank_(world_->rank()),
      shape_(checked_shape(*world_, sizes)),
      grid_(grid_axes(), {shape_.pipe, shape_.data, shape_.sequence, shape_.model}),
      expert_grid_(expert_axes(),
                   {shape_.pipe, shape_.data / shape_.expert, shape_.expert, shape_.sequence, shape_.model}) {
  std::vector<std::vector<std::vector<int>>> built;  // canonical partitions, by group index
  for (Group g : kAllGroups) {
    const auto all = lists(g);
    int color = -1, key = -1;
    for (size_t c = 0; c < all.size() && color < 0; ++c)
      for (size_t k = 0; k < all[c].size(); ++k)
        if (all[c][k] == rank_) color = int(c), key = int(k);
    DS_ASSERT(color >= 0, "rank " + std::to_string(rank_) + " is in no " + std::string(to_string(g)) + " group");
    mine_[index(g)] = all[size_t(color)];
    auto& slot = comms_[index(g)];
    const int members = int(all[size_t(color)].size());
    built.push_back(canonical(all));
    if (members == shape_.world) slot = world_;
    for (size_t j = 0; j + 1 < built.size() && !slot; ++j)
      if (built[j] == built.back()) slot = comms_[j];  // same members as an earlier group
    if (!slot && members == 1) slot = std::make_shared<comm::SingleCommunicator>();
    if (!slot) slot = world_->split(color, key, "topology_" + std::string(to_string(g)));
    DS_ASSERT(slot->size() == members && slot->rank() == key,
              std::string(to_string(g)) + " group: communicator rank " + std::to_string(slot->rank()) + "/" +
                  std::to_string(slot->size()) + ", expected " + std::to_string(key) + "/" + std::to_string(members));
  }
}

Topology::~Topology() = default;

std::vector<std::vector<int>> Topology::lists(Group g) const {
  switch (g) {
    case Group::Pipe: return grid_.axis_comm_lists("pipe");
    case Group::Data: return grid_.axis_comm_lists("data");
    case Group::Sequence: return grid_.axis_comm_lists("sequence");
    case Group::Model: return grid_.axis_comm_lists("model");
    case Group::SequenceData: return grid_.comm_lists({"data", "sequence"});
    case Group::Expert: return expert_grid_.axis_comm_lists("expert");
    case Group::ExpertData: return expert_grid_.axis_comm_lists("expert_data");
  }
  return {};
}

std::string Topology::describe() const {
  std::string s = grid_.describe() + ", expert " + std::to_string(shape_.expert) + "; rank " + std::to_string(rank_) + " =";
  const std::vector<int> c = coords();
  for (size_t i = 0; i < c.size(); ++i) s += (i ? ", " : " ") + grid_axes()[i] + " " + std::to_string(c[i]);
  return s;
}

}  // namespace ds::parallel
