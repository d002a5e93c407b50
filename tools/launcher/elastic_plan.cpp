// The elastic world choice (see elastic_plan.h).
#include "launcher/elastic_plan.h"

#include <fmt/format.h>

#include "util/error.h"

namespace ds::launcher {

ElasticChoice choose_elastic_world(const ActiveResources& alive, const ElasticJob& job, int min_nodes, int max_nodes) {
  ActiveResources pool = alive;
  if (max_nodes > 0 && static_cast<int>(pool.size()) > max_nodes) pool.resize(static_cast<size_t>(max_nodes));
  const int64_t slots = count_ranks(pool);
  const int64_t per = std::max<int64_t>(1, job.ranks_per_replica);
  std::string last_reason;
  for (int64_t world = slots - slots % per; world >= per; world -= per) {
    ElasticBatch batch;
    try {
      batch = compute_elastic_config(job.elasticity, world / per);
    } catch (const ConfigError& e) {
      if (last_reason.empty()) last_reason = e.what();
      continue;
    }
    ElasticChoice choice{{}, world, batch};
    int64_t left = world;
    for (const HostSlots& h : pool) {
      if (left == 0) break;
      HostSlots take = h;
      if (static_cast<int64_t>(take.slots.size()) > left) take.slots.resize(static_cast<size_t>(left));
      left -= static_cast<int64_t>(take.slots.size());
      choice.resources.push_back(std::move(take));
    }
    if (min_nodes > 0 && static_cast<int>(choice.resources.size()) < min_nodes)
      throw Error(fmt::format("elastic: the largest valid world size on the {} host(s) alive is {} ranks on {} "
                              "host(s), fewer than --min_elastic_nodes {}",
                              pool.size(), world, choice.resources.size(), min_nodes));
    return choice;
  }
  throw Error(fmt::format("elastic: no world size the elasticity section allows fits the {} slot(s) of the {} "
                          "host(s) alive ({}){}",
                          slots, pool.size(), host_names(pool), last_reason.empty() ? "" : "; " + last_reason));
}

std::string include_spec(const ActiveResources& resources) {
  std::string spec;
  for (const HostSlots& h : resources) {
    if (!spec.empty()) spec += "@";
    spec += h.host;
    if (h.slots.empty()) continue;
    spec += ":";
    for (size_t i = 0; i < h.slots.size(); ++i) spec += (i ? "," : "") + std::to_string(h.slots[i]);
  }
  return spec;
}

std::string host_names(const ActiveResources& resources) {
  std::string out;
  for (const HostSlots& h : resources) out += (out.empty() ? "" : ", ") + h.host;
  return out;
}

}  // namespace ds::launcher
