// ProcessTopology against DeepSpeed: the expected values of DeepSpeed's own unit tests
// (tests/unit/runtime/pipe/test_topology.py), the three (pipe, data, model) shapes of issue 14, the
// expert groups of deepspeed/utils/groups.py's docstrings, and, for many shapes, a literal
// transcription of DeepSpeed's Python (a dict filled by enumerating itertools.product in order).
// No communicator.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "parallel/process_topology.h"
#include "parallel/topology.h"
#include "util/error.h"

namespace ds::parallel::test {
namespace {

using Lists = std::vector<std::vector<int>>;

Lists sorted(Lists l) {
  std::sort(l.begin(), l.end());
  return l;
}

// --- DeepSpeed's test_topology.py, case by case ---

TEST(ProcessTopology, DeepSpeed2d) {
  ProcessTopology topo({"row", "col"}, {2, 2});
  EXPECT_EQ(topo.world_size(), 4);
  EXPECT_EQ(topo.rank_of({{"row", 0}, {"col", 0}}), 0);
  EXPECT_EQ(topo.rank_of({{"row", 0}, {"col", 1}}), 1);
  EXPECT_EQ(topo.rank_of({{"row", 1}, {"col", 0}}), 2);
  EXPECT_EQ(topo.rank_of({{"col", 1}, {"row", 1}}), 3);  // by name: any order
  EXPECT_EQ(topo.axis_list("row", 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(topo.axis_list("row", 1), (std::vector<int>{2, 3}));
  EXPECT_EQ(topo.axis_list("col", 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(topo.axis_list("col", 1), (std::vector<int>{1, 3}));
}

TEST(ProcessTopology, DeepSpeedDims) {
  ProcessTopology topo({"a", "b", "c"}, {2, 3, 4});
  EXPECT_EQ(topo.world_size(), 24);
  EXPECT_EQ(topo.dim("a"), 2);
  EXPECT_EQ(topo.dim("b"), 3);
  EXPECT_EQ(topo.dim("c"), 4);
  EXPECT_EQ(topo.dim("jeff"), 0);
}

TEST(ProcessTopology, DeepSpeedMatch) {
  ProcessTopology topo({"pipe", "data", "model"}, {2, 2, 2});
  EXPECT_EQ(topo.filter_match({{"pipe", 0}, {"data", 1}}), (std::vector<int>{2, 3}));
  EXPECT_EQ(topo.coords_of(2), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(topo.coords_of(3), (std::vector<int>{0, 1, 1}));
}

TEST(ProcessTopology, DeepSpeedRankRepr) {
  ProcessTopology ab({"a", "b"}, {2, 2});
  EXPECT_EQ(ab.rank_repr(0), "a_00-b_00");
  EXPECT_EQ(ab.rank_repr(1), "a_00-b_01");
  EXPECT_EQ(ab.rank_repr(2), "a_01-b_00");
  EXPECT_EQ(ab.rank_repr(3), "a_01-b_01");
  EXPECT_EQ(ab.rank_repr(3, {"data", "pipe"}, "+"), "a+01-b+01");
  EXPECT_EQ(ab.rank_repr(3, {"data", "pipe"}, "🤗", "_JEFF_"), "a🤗01_JEFF_b🤗01");

  ProcessTopology pd({"pipe", "data"}, {2, 2});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(pd.rank_repr(r), "");
  EXPECT_EQ(pd.rank_repr(0, {"pipe"}), "data_00");
  EXPECT_EQ(pd.rank_repr(1, {"pipe"}), "data_01");
  EXPECT_EQ(pd.rank_repr(2, {"pipe"}), "data_00");
  EXPECT_EQ(pd.rank_repr(3, {"pipe"}), "data_01");
  EXPECT_EQ(pd.rank_repr(0, {}), "pipe_00-data_00");
  EXPECT_EQ(pd.rank_repr(1, {}), "pipe_00-data_01");
  EXPECT_EQ(pd.rank_repr(2, {}), "pipe_01-data_00");
  EXPECT_EQ(pd.rank_repr(3, {}), "pipe_01-data_01");

  ProcessTopology pdm({"pipe", "data", "model"}, {2, 2, 2});
  for (int r = 0; r < 8; ++r) EXPECT_EQ(pdm.rank_repr(r), r % 2 ? "model_01" : "model_00");
}

TEST(ProcessTopology, DeepSpeed3d) {
  ProcessTopology topo({"a", "b", "c"}, {2, 2, 2});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c) {
        EXPECT_EQ(topo.rank_of({a, b, c}), 4 * a + 2 * b + c);
        EXPECT_EQ(topo.coords_of(4 * a + 2 * b + c), (std::vector<int>{a, b, c}));
      }
  EXPECT_EQ(topo.axis_list("a", 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(topo.axis_list("a", 1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(topo.axis_list("b", 0), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(topo.axis_list("b", 1), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(topo.axis_list("c", 0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(topo.axis_list("c", 1), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(topo.filter_match({{"a", 0}}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(topo.filter_match({{"b", 1}, {"c", 1}}), (std::vector<int>{3, 7}));
  EXPECT_EQ(topo.filter_match({{"a", 1}, {"b", 1}, {"c", 1}}), (std::vector<int>{7}));
  EXPECT_EQ(topo.coord_of(0, "a"), 0);
}

// The three issue-14 shapes. (2,2,2) is DeepSpeed's test_topology_comm_list verbatim; (1,4,2) and
// (2,4,1) follow from the same definitions (and agree with the transcription below).
struct PdmCase {
  int pipe, data, model;
  Lists pipe_lists, data_lists, model_lists;
};
const PdmCase kPdmCases[] = {
    {2, 2, 2, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {{0, 2}, {1, 3}, {4, 6}, {5, 7}}, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
    {1, 4, 2, {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}, {{0, 2, 4, 6}, {1, 3, 5, 7}}, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
    {2, 4, 1, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {{0, 1, 2, 3}, {4, 5, 6, 7}}, {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
};

TEST(ProcessTopology, PipeDataModelShapesOfIssue14) {
  for (const PdmCase& c : kPdmCases) {
    SCOPED_TRACE(std::to_string(c.pipe) + "x" + std::to_string(c.data) + "x" + std::to_string(c.model));
    ProcessTopology topo({"pipe", "data", "model"}, {c.pipe, c.data, c.model});
    for (int r = 0; r < 8; ++r) {
      const int p = r / (c.data * c.model), d = (r / c.model) % c.data, m = r % c.model;
      EXPECT_EQ(topo.coords_of(r), (std::vector<int>{p, d, m}));
      EXPECT_EQ(topo.rank_of({{"pipe", p}, {"data", d}, {"model", m}}), r);
    }
    EXPECT_EQ(topo.axis_comm_lists("pipe"), c.pipe_lists);
    EXPECT_EQ(topo.axis_comm_lists("data"), c.data_lists);
    EXPECT_EQ(topo.axis_comm_lists("model"), c.model_lists);
    EXPECT_EQ(topo.axis_comm_lists("jeff"), Lists{});  // DeepSpeed: [] for an unknown axis
    // Topology's grid (pipe, data, sequence 1, model) numbers the same way.
    ProcessTopology grid(Topology::grid_axes(), {c.pipe, c.data, 1, c.model});
    EXPECT_EQ(grid.axis_comm_lists("pipe"), c.pipe_lists);
    EXPECT_EQ(grid.axis_comm_lists("data"), c.data_lists);
    EXPECT_EQ(grid.axis_comm_lists("model"), c.model_lists);
    EXPECT_EQ(grid.comm_lists({"data", "sequence"}), c.data_lists);
  }
}

// Expert groups: deepspeed/utils/groups.py's docstring examples (order of the lists differs: compare
// as sets of groups).
TEST(ProcessTopology, ExpertGroupsAsDeepSpeed) {
  // E + M + D, world 16, model 2, expert 4 (_get_expert_parallel_ranks).
  ProcessTopology emd(Topology::expert_axes(), {1, 2, 4, 1, 2});
  EXPECT_EQ(sorted(emd.axis_comm_lists("expert")),
            sorted({{0, 2, 4, 6}, {8, 10, 12, 14}, {1, 3, 5, 7}, {9, 11, 13, 15}}));
  EXPECT_EQ(sorted(emd.axis_comm_lists("expert_data")),
            sorted({{0, 8}, {2, 10}, {4, 12}, {6, 14}, {1, 9}, {3, 11}, {5, 13}, {7, 15}}));
  // E + D, world 16, expert 2 (_create_expert_and_data_parallel, legacy path).
  ProcessTopology ed(Topology::expert_axes(), {1, 8, 2, 1, 1});
  EXPECT_EQ(ed.axis_comm_lists("expert"),
            (Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(ed.axis_comm_lists("expert_data"), (Lists{{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}}));
}

// Ulysses (deepspeed/runtime/sequence_parallel/parallel_state_sp.py): sequence groups are runs of
// sequence_parallel_size consecutive ranks; the sequence-data group is the whole world.
TEST(ProcessTopology, SequenceGroupsAsUlysses) {
  ProcessTopology grid(Topology::grid_axes(), {1, 2, 4, 1});  // world 8, sp 4
  EXPECT_EQ(grid.axis_comm_lists("sequence"), (Lists{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(grid.axis_comm_lists("data"), (Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(grid.comm_lists({"data", "sequence"}), (Lists{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(ProcessTopology, Refusals) {
  EXPECT_THROW(ProcessTopology({"a", "b"}, {2}), Error);
  EXPECT_THROW(ProcessTopology({"a"}, {0}), Error);
  EXPECT_THROW(ProcessTopology({"a", "a"}, {2, 2}), Error);
  ProcessTopology t({"pipe", "data"}, {2, 3});
  EXPECT_THROW(t.rank_of(std::vector<int>{0}), Error);  // a slice: use filter_match
  EXPECT_THROW(t.rank_of(std::vector<int>{2, 0}), Error);
  EXPECT_THROW(t.rank_of({{"pipe", 0}, {"model", 0}}), Error);
  EXPECT_THROW(t.coords_of(6), Error);
  EXPECT_THROW(t.axis_list("model", 0), Error);
  EXPECT_THROW(t.filter_match({{"model", 0}}), Error);
  try {
    t.coords_of(-1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "ProcessTopology: rank -1 not found in topology pipe 2 x data 3 (ranks 0..5)");
  }
}

// --- DeepSpeed's Python, transcribed literally, against ProcessTopology for many shapes ---

struct Reference {
  std::vector<std::string> axes;
  std::vector<int> dims;
  std::vector<std::vector<int>> coord_of_rank;  // the dict's insertion order = rank order
  std::map<std::vector<int>, int> mapping;

  // `for global_rank, coord in enumerate(cartesian_product(*ranges))`: last axis fastest.
  static void product(const std::vector<int>& dims, const std::function<void(const std::vector<int>&)>& f) {
    std::vector<int> c(dims.size(), 0);
    while (true) {
      f(c);
      size_t i = dims.size();
      while (i > 0 && ++c[i - 1] == dims[i - 1]) c[--i] = 0;
      if (i == 0) return;
    }
  }
  Reference(std::vector<std::string> a, std::vector<int> d) : axes(std::move(a)), dims(std::move(d)) {
    product(dims, [&](const std::vector<int>& c) {
      mapping[c] = int(coord_of_rank.size());
      coord_of_rank.push_back(c);
    });
  }
  size_t index(const std::string& axis) const { return size_t(std::find(axes.begin(), axes.end(), axis) - axes.begin()); }
  Lists get_axis_comm_lists(const std::string& axis) const {
    std::vector<size_t> other;
    std::vector<int> other_dims;
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != axis) other.push_back(i), other_dims.push_back(dims[i]);
    Lists lists;
    product(other_dims, [&](const std::vector<int>& oc) {
      std::vector<int> sub;
      for (int k = 0; k < dims[index(axis)]; ++k) {
        std::vector<int> key(axes.size());
        for (size_t j = 0; j < other.size(); ++j) key[other[j]] = oc[j];
        key[index(axis)] = k;
        sub.push_back(mapping.at(key));
      }
      lists.push_back(sub);
    });
    return lists;
  }
  std::vector<int> filter_match(const std::vector<AxisValue>& criteria) const {
    std::vector<int> out;
    for (size_t r = 0; r < coord_of_rank.size(); ++r) {
      bool ok = true;
      for (const auto& [a, v] : criteria) ok = ok && coord_of_rank[r][index(a)] == v;
      if (ok) out.push_back(int(r));
    }
    return out;
  }
};

TEST(ProcessTopology, MatchesDeepSpeedsAlgorithmForManyShapes) {
  const std::vector<std::string> names = {"pipe", "data", "sequence", "model", "expert"};
  int shapes = 0;
  for (size_t n = 1; n <= 4; ++n) {
    std::vector<int> dims(n, 1);
    Reference::product(std::vector<int>(n, 4), [&](const std::vector<int>& d0) {
      for (size_t i = 0; i < n; ++i) dims[i] = d0[i] + 1;  // sizes 1..4 per axis
      const std::vector<std::string> axes(names.begin(), names.begin() + long(n));
      ProcessTopology topo(axes, dims);
      Reference ref(axes, dims);
      ++shapes;
      SCOPED_TRACE(topo.describe());
      ASSERT_EQ(topo.world_size(), int(ref.coord_of_rank.size()));
      for (int r = 0; r < topo.world_size(); ++r) {
        ASSERT_EQ(topo.coords_of(r), ref.coord_of_rank[size_t(r)]);
        ASSERT_EQ(topo.rank_of(ref.coord_of_rank[size_t(r)]), r);
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(topo.dim(axes[i]), dims[i]);
        ASSERT_EQ(topo.axis_comm_lists(axes[i]), ref.get_axis_comm_lists(axes[i]));
        ASSERT_EQ(topo.comm_lists({axes[i]}), ref.get_axis_comm_lists(axes[i]));
        for (int v = 0; v < dims[i]; ++v) {
          ASSERT_EQ(topo.axis_list(axes[i], v), ref.filter_match({{axes[i], v}}));
          if (i + 1 < n) {  // two-axis criteria
            const std::vector<AxisValue> two = {{axes[i], v}, {axes[i + 1], dims[i + 1] - 1}};
            ASSERT_EQ(topo.filter_match(two), ref.filter_match(two));
          }
        }
      }
    });
  }
  EXPECT_EQ(shapes, 4 + 16 + 64 + 256);
}

}  // namespace
}  // namespace ds::parallel::test
