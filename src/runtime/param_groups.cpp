#include "runtime/param_groups.h"

#include <unordered_set>

namespace ds {

std::vector<ParamGroup> param_groups_by_name(torch::nn::Module& module, const std::vector<ParamGroupRule>& rules) {
  std::vector<ParamGroup> groups(rules.size() + 1);
  for (size_t r = 0; r < rules.size(); ++r) {
    groups[r].lr = rules[r].lr;
    groups[r].weight_decay = rules[r].weight_decay;
  }
  std::unordered_set<const void*> seen;  // a shared parameter is grouped once, under its first name
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad() || !seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    size_t target = rules.size();
    for (size_t r = 0; r < rules.size() && target == rules.size(); ++r)
      for (const auto& needle : rules[r].name_contains)
        if (item.key().find(needle) != std::string::npos) {
          target = r;
          break;
        }
    groups[target].params.push_back(item.key());
  }
  std::vector<ParamGroup> out;
  for (auto& g : groups)
    if (!g.params.empty()) out.push_back(std::move(g));
  return out;
}

std::vector<ParamGroup> no_decay_param_groups(torch::nn::Module& module, std::vector<std::string> no_decay) {
  return param_groups_by_name(module, {{std::move(no_decay), std::nullopt, 0.0}});
}

}  // namespace ds
