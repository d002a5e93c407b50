#include "runtime/trainable_params.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "util/error.h"

namespace ds {

std::vector<zero::NamedParam> collect_trainable_params(torch::nn::Module& module, const std::vector<ParamGroup>& groups,
                                                       MemoryLedger& ledger) {
  std::unordered_map<std::string, int> group_of;
  for (size_t g = 0; g < groups.size(); ++g)
    for (const auto& name : groups[g].params)
      if (!group_of.emplace(name, static_cast<int>(g)).second)
        throw ConfigError("param_groups", fmt::format("parameter '{}' is listed in more than one group", name));
  std::vector<zero::NamedParam> named;
  std::unordered_set<const void*> seen;
  std::unordered_set<std::string> found;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const torch::Tensor& p = item.value();
    found.insert(item.key());
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    if (!p.requires_grad()) {
      ledger.add(Tier::Device, MemKind::Params, p.numel() * p.element_size());
      continue;
    }
    int g = 0;
    if (!groups.empty()) {
      auto it = group_of.find(item.key());
      if (it == group_of.end())
        throw ConfigError("param_groups", fmt::format("trainable parameter '{}' is in no group (every trainable "
                                                      "parameter must be in exactly one)",
                                                      item.key()));
      g = it->second;
    }
    named.push_back({item.key(), p, g});
  }
  for (const auto& [name, g] : group_of)
    if (!found.count(name))
      throw ConfigError("param_groups", fmt::format("group {} names '{}', which is not a parameter of the model", g, name));
  DS_CHECK(!named.empty(), Error, "the model has no trainable parameters");
  return named;
}

}  // namespace ds
