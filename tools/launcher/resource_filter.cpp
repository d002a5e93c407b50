// Resource filtering with DeepSpeed's semantics (see resource_filter.h).
#include "launcher/resource_filter.h"

#include <algorithm>
#include <charconv>

#include "util/error.h"

namespace ds::launcher {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  return parts;
}

int parse_slot(const std::string& text, const std::string& node_spec) {
  int value = 0;
  const char* end = text.data() + text.size();
  const char* p = text.data();
  if (p != end && *p == '+') ++p;  // Python's int() accepts a leading sign
  const auto [ptr, ec] = std::from_chars(p, end, value);
  DS_CHECK(!text.empty() && ec == std::errc() && ptr == end, Error,
           "bad slot '" + text + "' in '" + node_spec + "' (expected NAME[:SLOT[,SLOT ...]], e.g. worker-1:0,2)");
  return value;
}

const HostSlots* find_host(const ActiveResources& hosts, const std::string& name) {
  for (const HostSlots& h : hosts)
    if (h.host == name) return &h;
  return nullptr;
}

HostSlots* find_host(ActiveResources& hosts, const std::string& name) {
  for (HostSlots& h : hosts)
    if (h.host == name) return &h;
  return nullptr;
}

}  // namespace

ActiveResources parse_node_config_list(const std::string& spec) {
  ActiveResources configs;
  for (const std::string& node : split(spec, '@')) {
    std::string name = node;
    std::vector<int> slots;
    const size_t colon = node.find(':');
    if (colon != std::string::npos) {
      DS_CHECK(node.find(':', colon + 1) == std::string::npos, Error,
               "bad node spec '" + node + "' (expected NAME[:SLOT[,SLOT ...]], one ':' at most)");
      name = node.substr(0, colon);
      for (const std::string& s : split(node.substr(colon + 1), ',')) slots.push_back(parse_slot(s, node));
    }
    HostSlots* existing = find_host(configs, name);
    if (existing == nullptr) {
      configs.push_back({name, {}});
      existing = &configs.back();
    }
    existing->slots.insert(existing->slots.end(), slots.begin(), slots.end());
  }
  for (HostSlots& c : configs) {
    std::sort(c.slots.begin(), c.slots.end());
    c.slots.erase(std::unique(c.slots.begin(), c.slots.end()), c.slots.end());
  }
  return configs;
}

ActiveResources parse_resource_filter(const ActiveResources& hosts, const std::string& include,
                                      const std::string& exclude) {
  DS_CHECK(include.empty() || exclude.empty(), Error,
           "--include and --exclude are mutually exclusive (give one of them)");
  if (include.empty() && exclude.empty()) return hosts;

  const bool including = !include.empty();
  // --include starts from nothing, --exclude from everything.
  ActiveResources filtered = including ? ActiveResources{} : hosts;
  for (const HostSlots& spec : parse_node_config_list(including ? include : exclude)) {
    const HostSlots* known = find_host(hosts, spec.host);
    DS_CHECK(known != nullptr, Error,
             "Hostname '" + spec.host + "' not found in hostfile (" + (including ? "--include" : "--exclude") +
                 " may only name hosts of the hostfile, or localhost without one)");
    for (int slot : spec.slots)
      DS_CHECK(std::find(known->slots.begin(), known->slots.end(), slot) != known->slots.end(), Error,
               "No slot '" + std::to_string(slot) + "' specified on host '" + spec.host + "' (it has " +
                   std::to_string(known->slots.size()) + " slots)");
    HostSlots* target = find_host(filtered, spec.host);
    if (including) {
      if (target == nullptr) {
        filtered.push_back({spec.host, {}});
        target = &filtered.back();
      }
      target->slots = spec.slots.empty() ? known->slots : spec.slots;
    } else if (target != nullptr) {
      if (spec.slots.empty()) {
        target->slots.clear();
      } else {
        std::erase_if(target->slots, [&](int s) {
          return std::find(spec.slots.begin(), spec.slots.end(), s) != spec.slots.end();
        });
      }
    }
  }

  // Hostfile order decides rank placement, so rebuild in `hosts` order and drop emptied hosts.
  ActiveResources ordered;
  for (const HostSlots& h : hosts) {
    const HostSlots* kept = find_host(filtered, h.host);
    if (kept != nullptr && !kept->slots.empty()) ordered.push_back(*kept);
  }
  return ordered;
}

ActiveResources parse_inclusion_exclusion(const ResourcePool& pool, const std::string& include,
                                          const std::string& exclude) {
  ActiveResources active;
  for (const HostEntry& e : pool) {
    HostSlots h{e.host, {}};
    for (int s = 0; s < e.slots; ++s) h.slots.push_back(s);
    active.push_back(std::move(h));
  }
  return parse_resource_filter(active, include, exclude);
}

ActiveResources limit_resources(ActiveResources active, int num_nodes, int num_gpus) {
  if (num_nodes > 0 && static_cast<size_t>(num_nodes) < active.size()) active.resize(num_nodes);
  if (num_gpus > 0) {
    for (HostSlots& h : active) {
      h.slots.clear();
      for (int s = 0; s < num_gpus; ++s) h.slots.push_back(s);
    }
  }
  return active;
}

int count_ranks(const ActiveResources& active) {
  int n = 0;
  for (const HostSlots& h : active) n += static_cast<int>(h.slots.size());
  return n;
}

}  // namespace ds::launcher
