// Topology: the job's ranks as a grid with DeepSpeed's axes and numbering, and one communicator per
// group this rank belongs to.
//
// The grid's axes, outermost first: pipe, data, sequence, model (model = tensor parallel, DeepSpeed's
// name). With sequence 1 the numbering is exactly DeepSpeed's PipeModelDataParallelTopology
// (axes pipe, data, model); with pipe and model 1 the sequence groups are consecutive ranks and the
// data groups strided, as deepspeed/runtime/sequence_parallel/parallel_state_sp.py builds them. The
// expert axis is not a grid axis: it splits the data axis into (expert_data, expert), expert
// innermost, which is DeepSpeed's E + D layout (groups.py: expert groups are runs of ep_size
// data-parallel ranks, expert-data groups take one rank from each run).
//
// Groups (each a communicator): pipe, data, sequence, model along one axis each; sequence_data
// (data x sequence: what ZeRO partitions over, DeepSpeed's sequence-data-parallel group); expert and
// expert_data. A group of the whole world is the world communicator itself, a group with the same
// members as an earlier one shares its communicator (so two such groups are ONE communicator: one
// order of collectives), any other one-rank group is a SingleCommunicator, and every other group is
// the world's split(). With all sizes 1 every group but data and sequence_data is a world of one, and
// data_parallel() IS the world communicator: exactly today's data-parallel job.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "parallel/process_topology.h"
#include "parallel/topology_sizes.h"

namespace ds::parallel {

enum class Group : uint8_t { Pipe, Data, Sequence, Model, SequenceData, Expert, ExpertData };
inline constexpr std::array<Group, 7> kAllGroups = {Group::Pipe,         Group::Data,   Group::Sequence,  Group::Model,
                                                    Group::SequenceData, Group::Expert, Group::ExpertData};
// "pipe", "data", "sequence", "model", "sequence_data", "expert", "expert_data"
std::string_view to_string(Group g) noexcept;

class Topology {
 public:
  // The grid's axis names, outermost first, and the expert view's.
  static const std::vector<std::string>& grid_axes();    // pipe, data, sequence, model
  static const std::vector<std::string>& expert_axes();  // pipe, expert_data, expert, sequence, model

  // Collective over `world`: every rank constructs it at the same point. Checks first (one
  // all_gather of the sizes when world > 1) that every rank was given the same sizes, then resolves
  // them (resolve_shape: ConfigError naming the key) and splits the world, one split per group that
  // is neither one rank nor the whole world, in kAllGroups order.
  Topology(std::shared_ptr<comm::Communicator> world, const TopologySizes& sizes = {});
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  const TopologyShape& shape() const noexcept { return shape_; }
  const ProcessTopology& grid() const noexcept { return grid_; }
  const ProcessTopology& expert_grid() const noexcept { return expert_grid_; }
  int rank() const noexcept { return rank_; }  // in the world
  int world_size() const noexcept { return shape_.world; }
  // This rank's coordinates on the grid (pipe, data, sequence, model).
  std::vector<int> coords() const { return grid_.coords_of(rank_); }

  comm::Communicator& world() const noexcept { return *world_; }
  comm::Communicator& comm(Group g) const noexcept { return *comms_[index(g)]; }
  std::shared_ptr<comm::Communicator> shared_comm(Group g) const noexcept { return comms_[index(g)]; }
  comm::Communicator& pipe() const noexcept { return comm(Group::Pipe); }
  comm::Communicator& data() const noexcept { return comm(Group::Data); }
  comm::Communicator& sequence() const noexcept { return comm(Group::Sequence); }
  comm::Communicator& model() const noexcept { return comm(Group::Model); }
  comm::Communicator& expert() const noexcept { return comm(Group::Expert); }
  comm::Communicator& expert_data() const noexcept { return comm(Group::ExpertData); }
  // The group ZeRO partitions states over and averages gradients in: data x sequence (the world
  // when every size is 1).
  comm::Communicator& data_parallel() const noexcept { return comm(Group::SequenceData); }
  std::shared_ptr<comm::Communicator> shared_data_parallel() const noexcept { return shared_comm(Group::SequenceData); }

  // Every group of kind g (all ranks' groups), as DeepSpeed's get_axis_comm_lists orders them for
  // the axis groups; each list holds global ranks in group-rank order.
  std::vector<std::vector<int>> lists(Group g) const;
  // This rank's group of kind g: global ranks in group-rank order (comm(g).rank() indexes it).
  const std::vector<int>& ranks(Group g) const noexcept { return mine_[index(g)]; }

  // "pipe 2 x data 2 x sequence 1 x model 2, expert 1; rank 5 = pipe 1, data 0, sequence 0, model 1"
  std::string describe() const;

 private:
  static size_t index(Group g) noexcept { return size_t(g); }

  std::shared_ptr<comm::Communicator> world_;
  int rank_ = 0;
  TopologyShape shape_;
  ProcessTopology grid_;
  ProcessTopology expert_grid_;
  std::array<std::shared_ptr<comm::Communicator>, kAllGroups.size()> comms_;
  std::array<std::vector<int>, kAllGroups.size()> mine_;
};

}  // namespace ds::parallel
