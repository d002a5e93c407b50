// Row-major numbering of named axes, query for query as DeepSpeed's ProcessTopology.
#include "parallel/process_topology.h"

#include <algorithm>
#include <cstdio>

#include "util/error.h"

namespace ds::parallel {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

ProcessTopology::ProcessTopology(std::vector<std::string> axes, std::vector<int> dims)
    : axes_(std::move(axes)), dims_(std::move(dims)) {
  DS_CHECK(axes_.size() == dims_.size(), Error,
           "ProcessTopology: " + std::to_string(axes_.size()) + " axis names but " + std::to_string(dims_.size()) +
               " sizes (give one size per axis)");
  strides_.assign(axes_.size(), 1);
  int64_t world = 1;
  for (size_t i = axes_.size(); i-- > 0;) {
    DS_CHECK(dims_[i] >= 1, Error,
             "ProcessTopology: axis '" + axes_[i] + "' has size " + std::to_string(dims_[i]) + " (sizes must be >= 1)");
    DS_CHECK(std::count(axes_.begin(), axes_.end(), axes_[i]) == 1, Error,
             "ProcessTopology: axis '" + axes_[i] + "' is named twice in (" + join(axes_) + ")");
    strides_[i] = int(world);
    world *= dims_[i];
    DS_CHECK(world <= (int64_t(1) << 30), Error, "ProcessTopology: " + describe() + " has too many ranks");
  }
  world_ = int(world);
}

bool ProcessTopology::has_axis(std::string_view axis) const noexcept {
  return std::find(axes_.begin(), axes_.end(), axis) != axes_.end();
}

int ProcessTopology::dim(std::string_view axis) const noexcept {
  const auto it = std::find(axes_.begin(), axes_.end(), axis);
  return it == axes_.end() ? 0 : dims_[size_t(it - axes_.begin())];
}

int ProcessTopology::index_of(std::string_view axis) const {
  const auto it = std::find(axes_.begin(), axes_.end(), axis);
  DS_CHECK(it != axes_.end(), Error,
           "ProcessTopology: no axis named '" + std::string(axis) + "' (the axes are " + join(axes_) + ")");
  return int(it - axes_.begin());
}

void ProcessTopology::check_rank(int rank) const {
  DS_CHECK(rank >= 0 && rank < world_, Error,
           "ProcessTopology: rank " + std::to_string(rank) + " not found in topology " + describe() + " (ranks 0.." +
               std::to_string(world_ - 1) + ")");
}

int ProcessTopology::rank_of(const std::vector<int>& coords) const {
  DS_CHECK(coords.size() == axes_.size(), Error,
           "ProcessTopology::rank_of: " + std::to_string(coords.size()) + " coordinates for " +
               std::to_string(axes_.size()) + " axes (" + join(axes_) + "); use filter_match for a slice");
  int rank = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    DS_CHECK(coords[i] >= 0 && coords[i] < dims_[i], Error,
             "ProcessTopology::rank_of: " + axes_[i] + " = " + std::to_string(coords[i]) + " is outside [0, " +
                 std::to_string(dims_[i]) + ")");
    rank += coords[i] * strides_[i];
  }
  return rank;
}

int ProcessTopology::rank_of(const std::vector<AxisValue>& coords) const {
  DS_CHECK(coords.size() == axes_.size(), Error,
           "ProcessTopology::rank_of: " + std::to_string(coords.size()) + " coordinates for " +
               std::to_string(axes_.size()) + " axes (" + join(axes_) + "); use filter_match for a slice");
  std::vector<int> ordered(axes_.size(), -1);
  for (const auto& [axis, value] : coords) {
    const int i = index_of(axis);
    DS_CHECK(ordered[size_t(i)] < 0, Error, "ProcessTopology::rank_of: axis '" + axis + "' given twice");
    DS_CHECK(value >= 0, Error,
             "ProcessTopology::rank_of: " + axis + " = " + std::to_string(value) + " is negative");
    ordered[size_t(i)] = value;
  }
  return rank_of(ordered);
}

std::vector<int> ProcessTopology::coords_of(int rank) const {
  check_rank(rank);
  std::vector<int> c(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) c[i] = (rank / strides_[i]) % dims_[i];
  return c;
}

int ProcessTopology::coord_of(int rank, std::string_view axis) const {
  check_rank(rank);
  const size_t i = size_t(index_of(axis));
  return (rank / strides_[i]) % dims_[i];
}

std::vector<std::vector<int>> ProcessTopology::axis_comm_lists(std::string_view axis) const {
  if (!has_axis(axis)) return {};
  return comm_lists({std::string(axis)});
}

std::vector<std::vector<int>> ProcessTopology::comm_lists(const std::vector<std::string>& varying) const {
  std::vector<bool> varies(axes_.size(), false);
  for (const auto& a : varying) varies[size_t(index_of(a))] = true;
  // A rank belongs to the group keyed by its coordinates on the fixed axes. Walking ranks in order
  // appends each to its group in ascending order, and groups first appear in row-major order of the
  // fixed axes (the rank with all varying coordinates 0 comes first), as DeepSpeed's
  // cartesian_product over the other axes.
  int groups = 1;
  for (size_t i = 0; i < axes_.size(); ++i)
    if (!varies[i]) groups *= dims_[i];
  std::vector<std::vector<int>> lists(static_cast<size_t>(groups));
  for (int r = 0; r < world_; ++r) {
    int key = 0;
    for (size_t i = 0; i < axes_.size(); ++i)
      if (!varies[i]) key = key * dims_[i] + (r / strides_[i]) % dims_[i];
    lists[size_t(key)].push_back(r);
  }
  return lists;
}

std::vector<int> ProcessTopology::axis_list(std::string_view axis, int idx) const {
  return filter_match({{std::string(axis), idx}});
}

std::vector<int> ProcessTopology::filter_match(const std::vector<AxisValue>& criteria) const {
  std::vector<std::pair<size_t, int>> want;
  for (const auto& [axis, value] : criteria) want.emplace_back(size_t(index_of(axis)), value);
  std::vector<int> out;
  for (int r = 0; r < world_; ++r) {
    bool ok = true;
    for (const auto& [i, v] : want) ok = ok && (r / strides_[i]) % dims_[i] == v;
    if (ok) out.push_back(r);
  }
  return out;
}

std::string ProcessTopology::rank_repr(int rank, const std::vector<std::string>& omit_axes, std::string_view inner_sep,
                                       std::string_view outer_sep) const {
  const std::vector<int> c = coords_of(rank);
  std::string s;
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (std::find(omit_axes.begin(), omit_axes.end(), axes_[i]) != omit_axes.end()) continue;
    char digits[16];
    std::snprintf(digits, sizeof digits, "%02d", c[i]);
    if (!s.empty()) s += outer_sep;
    s.append(axes_[i]).append(inner_sep).append(digits);
  }
  return s;
}

std::string ProcessTopology::describe() const {
  std::string s;
  for (size_t i = 0; i < axes_.size(); ++i) s += (i ? " x " : "") + axes_[i] + " " + std::to_string(dims_[i]);
  return s;
}

}  // namespace ds::parallel
