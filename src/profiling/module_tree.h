// The module tree the flops profiler reports on: a flat pre-order index of a torch::nn::Module's
// submodules (names, types, parameter counts, which module owns which parameter), and the
// ModuleProfile tree it turns into once the per-module costs are known.
//
// LibTorch has no module forward hooks, so an operator is tied to a module by the parameters it
// reads (owner_of) and, when it reads none, by where the last parameter-reading operator was
// (context_after). See docs/profiler.md "Attribution".
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ds::profiling {

// One module's profile; every number covers the module and its whole subtree.
struct ModuleProfile {
  std::string name;        // key under the parent ("c_attn", "0"); "" for the root
  std::string path;        // dotted path from the root ("transformer.h.0.attn"); "" for the root
  std::string type_name;   // C++ type without namespace or "Impl": "Linear", "Block"
  std::string extra_repr;  // the module's own description, e.g. "in_features=64, out_features=192, bias=true"
  int depth = 0;           // root 0
  int64_t params = 0;      // parameters of the subtree, a shared tensor counted once
  int64_t flops = 0;
  int64_t macs = 0;
  double latency_s = 0.0;  // summed time of the operators attributed to the subtree
  int64_t ops = 0;         // operators attributed to the subtree
  std::vector<ModuleProfile> children;
};

// What the operators attributed to one module itself (not its children) cost.
struct SelfCost {
  int64_t flops = 0;
  int64_t macs = 0;
  double latency_s = 0.0;
  int64_t ops = 0;
};

class ModuleIndex {
 public:
  struct Node {
    std::string name, path, type_name, extra_repr;
    int depth = 0;
    int parent = -1;  // -1 for the root (node 0)
    std::vector<int> children;
    int64_t params = 0;
    // A torch::nn layer with no submodules (Linear, LayerNorm, Embedding): it runs one operator,
    // so the parameter-less operators after it belong to its parent.
    bool builtin_leaf = false;
  };

  explicit ModuleIndex(torch::nn::Module& root);

  const std::vector<Node>& nodes() const noexcept { return nodes_; }

  // The module that registered parameter `t` (first in pre-order if shared), matched by tensor
  // identity (kept across Module::to and set_data) and then by data pointer (a view or alias of a
  // parameter starting at its first element); -1 when `t` is no parameter of the tree.
  int owner_of(const at::Tensor& t) const;

  // Where an operator that reads no parameter goes when `last` is the module of the latest
  // parameter-reading operator: its parent if `last` is a built-in leaf layer, else `last`
  // itself; the root when nothing has read a parameter yet (last == -1).
  int context_after(int last) const;

  // The tree with every subtree's totals, from per-node self costs (indexed like nodes()).
  ModuleProfile build(const std::vector<SelfCost>& self) const;

 private:
  void add(torch::nn::Module& m, const std::string& name, const std::string& path, int depth,
           int parent);

  std::vector<Node> nodes_;
  std::unordered_map<const void*, int> by_impl_;
  std::unordered_map<const void*, int> by_data_;
};

// "torch::nn::LinearImpl" → "Linear", "ds::models::BlockImpl" → "Block".
std::string short_type_name(const std::string& cxx_name);

}  // namespace ds::profiling
