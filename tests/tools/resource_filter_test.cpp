// --include / --exclude / --num_nodes / --num_gpus: DeepSpeed's test_run.py cases
// (test_parser_local, test_parser_multinode, test_parse_inclusion_exclusion, test_parser_errors,
// test_parser_mutual_exclusive) with the same inputs and expected results.
#include <gtest/gtest.h>

#include "launcher/resource_filter.h"
#include "util/error.h"

namespace ds::launcher {
namespace {

const ActiveResources kOne = {{"worker-0", {0, 1, 2, 3}}};
const ActiveResources kTwo = {{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 1, 2, 3}}};

std::string error_of(const ActiveResources& hosts, const std::string& inc, const std::string& exc) {
  try {
    parse_resource_filter(hosts, inc, exc);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LauncherResourceFilter, MutuallyExclusive) {
  EXPECT_NE(error_of({}, "A", "B").find("mutually exclusive"), std::string::npos);
}

TEST(LauncherResourceFilter, Local) {
  EXPECT_EQ(parse_resource_filter(kOne, "", ""), kOne);
  EXPECT_EQ(parse_resource_filter(kOne, "", "worker-0:1"), (ActiveResources{{"worker-0", {0, 2, 3}}}));
  EXPECT_EQ(parse_resource_filter(kOne, "", "worker-0:1,2"), (ActiveResources{{"worker-0", {0, 3}}}));
  EXPECT_EQ(parse_resource_filter(kOne, "worker-0:1", ""), (ActiveResources{{"worker-0", {1}}}));
  EXPECT_EQ(parse_resource_filter(kOne, "worker-0:1,1", ""), (ActiveResources{{"worker-0", {1}}}));
  EXPECT_EQ(parse_resource_filter(kOne, "worker-0:1@worker-0:0,1", ""), (ActiveResources{{"worker-0", {0, 1}}}));
  EXPECT_EQ(parse_resource_filter(kOne, "worker-0", ""), kOne);
  EXPECT_EQ(parse_resource_filter(kOne, "", "worker-0"), ActiveResources{});
  EXPECT_EQ(parse_resource_filter(kOne, "", "worker-0:0,1,2,3"), ActiveResources{});
}

TEST(LauncherResourceFilter, Multinode) {
  EXPECT_EQ(parse_resource_filter(kTwo, "", ""), kTwo);
  EXPECT_EQ(parse_resource_filter(kTwo, "worker-1:0,3", ""), (ActiveResources{{"worker-1", {0, 3}}}));
  EXPECT_EQ(parse_resource_filter(kTwo, "", "worker-1"), (ActiveResources{{"worker-0", {0, 1, 2, 3}}}));
  EXPECT_EQ(parse_resource_filter(kTwo, "", "worker-0:0,1@worker-1:3"),
            (ActiveResources{{"worker-0", {2, 3}}, {"worker-1", {0, 1, 2}}}));
}

TEST(LauncherResourceFilter, HostfileOrderWinsOverFilterOrder) {
  EXPECT_EQ(parse_resource_filter(kTwo, "worker-1:2@worker-0:1", ""),
            (ActiveResources{{"worker-0", {1}}, {"worker-1", {2}}}));
}

TEST(LauncherResourceFilter, InclusionExclusionFromSlotCounts) {
  const ResourcePool pool = {{"worker-0", 4}, {"worker-1", 4}};
  EXPECT_EQ(parse_inclusion_exclusion(pool, "", ""), kTwo);
  EXPECT_EQ(parse_inclusion_exclusion(pool, "worker-0", ""), (ActiveResources{{"worker-0", {0, 1, 2, 3}}}));
  EXPECT_EQ(parse_inclusion_exclusion(pool, "worker-0@worker-1:0,2", ""),
            (ActiveResources{{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 2}}}));
  EXPECT_EQ(parse_inclusion_exclusion(pool, "worker-1:0,2", ""), (ActiveResources{{"worker-1", {0, 2}}}));
  EXPECT_EQ(parse_inclusion_exclusion(pool, "", "worker-0:1"),
            (ActiveResources{{"worker-0", {0, 2, 3}}, {"worker-1", {0, 1, 2, 3}}}));
}

TEST(LauncherResourceFilter, InclusionExclusionErrors) {
  const ResourcePool pool = {{"worker-0", 4}};
  for (const char* spec : {"worker-0:4", "worker-0:99", "worker-0:0,4"}) {
    EXPECT_THROW(parse_inclusion_exclusion(pool, spec, ""), Error) << spec;
    EXPECT_THROW(parse_inclusion_exclusion(pool, "", spec), Error) << spec;
  }
  EXPECT_THROW(parse_inclusion_exclusion(pool, "jeff", ""), Error);
}

TEST(LauncherResourceFilter, Errors) {
  EXPECT_NE(error_of(kTwo, "jeff", "").find("Hostname 'jeff' not found in hostfile"), std::string::npos);
  EXPECT_NE(error_of(kTwo, "", "jeff").find("Hostname 'jeff' not found in hostfile"), std::string::npos);
  EXPECT_NE(error_of(kTwo, "worker-1:4", "").find("No slot '4' specified on host 'worker-1'"), std::string::npos);
  EXPECT_NE(error_of(kTwo, "", "worker-1:4").find("No slot '4' specified on host 'worker-1'"), std::string::npos);
  EXPECT_NE(error_of(kTwo, "", "worker-1@worker-0:1@5").find("Hostname '5' not found"), std::string::npos);
  // malformed specs DeepSpeed rejects through int() / tuple unpacking
  EXPECT_NE(error_of(kTwo, "worker-1:a", "").find("bad slot 'a'"), std::string::npos);
  EXPECT_NE(error_of(kTwo, "worker-1:", "").find("bad slot ''"), std::string::npos);
  EXPECT_NE(error_of(kTwo, "worker-1:0:1", "").find("one ':' at most"), std::string::npos);
  EXPECT_NE(error_of(kTwo, "worker-1@", "").find("Hostname '' not found"), std::string::npos);
}

TEST(LauncherResourceFilter, NodeConfigList) {
  EXPECT_EQ(parse_node_config_list("worker-0@worker-1:2,0,2"),
            (ActiveResources{{"worker-0", {}}, {"worker-1", {0, 2}}}));
}

TEST(LauncherResourceFilter, NumNodesAndNumGpus) {
  EXPECT_EQ(limit_resources(kTwo, 1, -1), (ActiveResources{{"worker-0", {0, 1, 2, 3}}}));
  EXPECT_EQ(limit_resources(kTwo, 5, -1), kTwo);
  EXPECT_EQ(limit_resources(kTwo, -1, 2), (ActiveResources{{"worker-0", {0, 1}}, {"worker-1", {0, 1}}}));
  EXPECT_EQ(limit_resources(kTwo, 1, 6), (ActiveResources{{"worker-0", {0, 1, 2, 3, 4, 5}}}));
  EXPECT_EQ(count_ranks(kTwo), 8);
}

}  // namespace
}  // namespace ds::launcher
