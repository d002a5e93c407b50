// ProcessTopology: DeepSpeed's rank numbering (deepspeed/runtime/pipe/topology.py) without any
// communication. Named axes with a size each; ranks are the row-major (C order) linear indices of
// the coordinates, so the LAST axis varies fastest: axes {pipe, data, model} with sizes {2, 2, 2}
// give rank 1 = (pipe 0, data 0, model 1) and rank 2 = (pipe 0, data 1, model 0). Every query
// returns what the Python method of the same name returns, in the same order:
//   get_rank -> rank_of, get_coord -> coords_of, get_dim -> dim, get_axis_comm_lists ->
//   axis_comm_lists, get_axis_list -> axis_list, filter_match -> filter_match,
//   get_rank_repr -> rank_repr, world_size -> world_size.
// Plain C++ (no communicator): Topology (topology.h) builds its sub-communicators from these lists.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds::parallel {

// One rank's coordinate along one named axis, for filter_match and rank_of by name.
using AxisValue = std::pair<std::string, int>;

class ProcessTopology {
 public:
  // Throws ds::Error when the lists differ in length, a size is < 1, or a name repeats.
  ProcessTopology(std::vector<std::string> axes, std::vector<int> dims);

  const std::vector<std::string>& axes() const noexcept { return axes_; }
  const std::vector<int>& dims() const noexcept { return dims_; }
  int world_size() const noexcept { return world_; }
  bool has_axis(std::string_view axis) const noexcept;
  // The size of `axis`; 0 when there is no such axis (as DeepSpeed's get_dim).
  int dim(std::string_view axis) const noexcept;

  // The rank at `coords` (one per axis, in axis order). Throws ds::Error on a wrong count or a
  // coordinate out of range.
  int rank_of(const std::vector<int>& coords) const;
  // The same by name: every axis exactly once, in any order.
  int rank_of(const std::vector<AxisValue>& coords) const;
  // The coordinates of `rank`, in axis order. Throws ds::Error when rank is outside [0, world).
  std::vector<int> coords_of(int rank) const;
  // One coordinate of `rank`. Throws ds::Error for an unknown axis.
  int coord_of(int rank, std::string_view axis) const;

  // The groups of ranks whose coordinates agree on every axis except `axis`: one list per
  // combination of the other axes (row-major over them), each ordered along `axis`. [] when there
  // is no such axis (DeepSpeed returns [] too, "to write more generalized code").
  std::vector<std::vector<int>> axis_comm_lists(std::string_view axis) const;
  // The same for several axes at once (not in DeepSpeed): groups that agree on every axis not in
  // `varying`, each ordered by rank. Throws ds::Error for an unknown axis.
  std::vector<std::vector<int>> comm_lists(const std::vector<std::string>& varying) const;
  // The ranks whose coordinate along `axis` is `idx`, ascending. Throws ds::Error for an unknown axis.
  std::vector<int> axis_list(std::string_view axis, int idx) const;
  // The ranks whose coordinates match every (axis, value) given, ascending. Throws ds::Error for
  // an unknown axis.
  std::vector<int> filter_match(const std::vector<AxisValue>& criteria) const;

  // "model_01": the axes not omitted, each as <axis><inner_sep><coordinate, 2 digits>, joined by
  // outer_sep (what DeepSpeed's pipeline checkpoints put in file names).
  std::string rank_repr(int rank, const std::vector<std::string>& omit_axes = {"data", "pipe"},
                        std::string_view inner_sep = "_", std::string_view outer_sep = "-") const;
  // "pipe 2 x data 2 x model 2"
  std::string describe() const;

 private:
  int index_of(std::string_view axis) const;  // throws ds::Error naming the axes
  void check_rank(int rank) const;

  std::vector<std::string> axes_;
  std::vector<int> dims_;
  std::vector<int> strides_;  // row-major: strides_.back() == 1
  int world_ = 1;
};

}  // namespace ds::parallel
