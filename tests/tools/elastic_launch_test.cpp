// ds-run --elastic_training's pieces without processes: the world chosen on the hosts alive, the
// --include spec that selects it, the rsh agent a probe uses, the probe itself against a scripted
// agent (reachable, refused, too slow), and finding the DeepSpeed config among the program's args.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "launcher/elastic_plan.h"
#include "launcher/elastic_run.h"
#include "launcher/host_probe.h"
#include "util/error.h"

namespace ds::launcher {
namespace {

// Batch 12 with micro batches 1, 2, 3 over 1..4 ranks: valid sizes [1, 2, 3, 4].
ElasticJob job(int64_t ranks_per_replica = 1) {
  ElasticJob j;
  j.elasticity.enabled = true;
  j.elasticity.max_train_batch_size = 12;
  j.elasticity.micro_batch_sizes = {1, 2, 3};
  j.elasticity.min_gpus = 1;
  j.elasticity.max_gpus = 4;
  j.elasticity.version = 0.1;
  j.ranks_per_replica = ranks_per_replica;
  return j;
}

ActiveResources hosts(int n, int slots) {
  ActiveResources out;
  for (int i = 0; i < n; ++i) {
    HostSlots h{"worker-" + std::to_string(i), {}};
    for (int s = 0; s < slots; ++s) h.slots.push_back(s);
    out.push_back(h);
  }
  return out;
}

TEST(ElasticLaunch, TakesTheLargestValidWorldOnTheHostsAlive) {
  const ElasticChoice four = choose_elastic_world(hosts(4, 1), job(), -1, -1);
  EXPECT_EQ(four.world, 4);
  EXPECT_EQ(four.batch.micro_batch_size, 3);
  EXPECT_EQ(include_spec(four.resources), "worker-0:0@worker-1:0@worker-2:0@worker-3:0");
  const ElasticChoice three = choose_elastic_world(hosts(3, 1), job(), -1, -1);
  EXPECT_EQ(three.world, 3);
  EXPECT_EQ(three.batch.gradient_accumulation_steps, 2);  // micro 2
  // 3 hosts of 2 slots: 6 slots, but 4 is the largest valid size: two whole hosts.
  const ElasticChoice packed = choose_elastic_world(hosts(3, 2), job(), -1, -1);
  EXPECT_EQ(packed.world, 4);
  EXPECT_EQ(include_spec(packed.resources), "worker-0:0,1@worker-1:0,1");
  // 2 ranks per data-parallel rank (e.g. 2 pipeline stages): 6 slots hold 3 replicas.
  const ElasticChoice piped = choose_elastic_world(hosts(3, 2), job(2), -1, -1);
  EXPECT_EQ(piped.world, 6);
  EXPECT_EQ(piped.batch.micro_batch_size, 2);
  EXPECT_EQ(choose_elastic_world(hosts(4, 1), job(), -1, 2).world, 2) << "--max_elastic_nodes 2";
}

TEST(ElasticLaunch, NamesWhyNothingFits) {
  ElasticJob strict = job();
  strict.elasticity.min_gpus = 3;  // valid [3, 4]
  try {
    choose_elastic_world(hosts(2, 1), strict, -1, -1);
    FAIL() << "2 slots cannot hold 3 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no world size the elasticity section allows fits the 2 slot(s) of the 2 "
                                         "host(s) alive (worker-0, worker-1)"),
              std::string::npos)
        << e.what();
  }
  try {
    choose_elastic_world(hosts(4, 2), job(), 3, -1);  // 4 ranks fill 2 hosts
    FAIL() << "--min_elastic_nodes 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than --min_elastic_nodes 3"), std::string::npos) << e.what();
  }
}

TEST(ElasticLaunch, ProbesThroughOpenMpisAgent) {
  EXPECT_EQ(rsh_agent({"--mca", "plm_rsh_agent", "/x/agent", "--bind-to", "none"}, {}), std::vector<std::string>{"/x/agent"});
  EXPECT_EQ(rsh_agent({}, {"OMPI_MCA_plm_rsh_agent=rsh -p 2 : ssh"}), (std::vector<std::string>{"rsh", "-p", "2"}));
  EXPECT_EQ(rsh_agent({}, {}), (std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"}));

  const auto dir = std::filesystem::temp_directory_path() / ("ds_probe_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto agent = dir / "agent";
  std::ofstream(agent) << "#!/bin/sh\n# <agent> HOST true\ncase \"$1\" in up) exec \"$2\" ;; slow) sleep 5 ;; *) exit 255 ;; esac\n";
  std::filesystem::permissions(agent, std::filesystem::perms::owner_all);
  const std::vector<std::string> a = {agent.string()};
  EXPECT_TRUE(host_reachable("up", a, {"localhost"}, 5));
  EXPECT_FALSE(host_reachable("down", a, {"localhost"}, 5));
  EXPECT_TRUE(host_reachable("localhost", {"false"}, {"localhost"}, 5)) << "this machine is never probed";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(host_reachable("slow", a, {"localhost"}, 0.3));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0) << "killed at the limit";
  std::filesystem::remove_all(dir);
}

TEST(ElasticLaunch, FindsTheConfigInTheProgramsArguments) {
  EXPECT_EQ(find_config_argument({"ds-train", "--config", "a.json", "--steps", "3"}), "a.json");
  EXPECT_EQ(find_config_argument({"train.py", "--deepspeed_config=b.json"}), "b.json");
  EXPECT_EQ(find_config_argument({"train", "--ds_config", "c.json"}), "c.json");
  EXPECT_EQ(find_config_argument({"train", "--steps", "3"}), "");
}

}  // namespace
}  // namespace ds::launcher
