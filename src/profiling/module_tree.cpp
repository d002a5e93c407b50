// ModuleIndex: walks the module tree once at FlopsProfiler::start(), so the per-operator callback
// only does hash look-ups.
#include "profiling/module_tree.h"

#include <sstream>
#include <unordered_set>

namespace ds::profiling {
namespace {

// Parameters of the subtree, each tensor once (Python's module.parameters() de-duplicates too).
int64_t count_params(torch::nn::Module& m) {
  std::unordered_set<const void*> seen;
  int64_t n = 0;
  for (const auto& p : m.parameters(/*recurse=*/true)) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) n += p.numel();
  }
  return n;
}

// The text inside "torch::nn::Linear(...)" from the module's pretty_print, which plays the part of
// Python's extra_repr; empty for modules that print only their name or print several lines.
std::string extra_repr_of(const torch::nn::Module& m) {
  std::ostringstream os;
  m.pretty_print(os);
  const std::string s = os.str();
  const auto open = s.find('(');
  if (open == std::string::npos || s.empty() || s.back() != ')' ||
      s.find('\n') != std::string::npos) {
    return "";
  }
  return s.substr(open + 1, s.size() - open - 2);
}

void subtree_totals(const std::vector<ModuleIndex::Node>& nodes, const std::vector<SelfCost>& self,
                    int i, ModuleProfile& out) {
  const auto& n = nodes[static_cast<size_t>(i)];
  out.name = n.name;
  out.path = n.path;
  out.type_name = n.type_name;
  out.extra_repr = n.extra_repr;
  out.depth = n.depth;
  out.params = n.params;
  if (static_cast<size_t>(i) < self.size()) {
    const SelfCost& s = self[static_cast<size_t>(i)];
    out.flops = s.flops;
    out.macs = s.macs;
    out.latency_s = s.latency_s;
    out.ops = s.ops;
  }
  out.children.resize(n.children.size());
  for (size_t c = 0; c < n.children.size(); ++c) {
    ModuleProfile& child = out.children[c];
    subtree_totals(nodes, self, n.children[c], child);
    out.flops += child.flops;
    out.macs += child.macs;
    out.latency_s += child.latency_s;
    out.ops += child.ops;
  }
}

}  // namespace

std::string short_type_name(const std::string& cxx_name) {
  // Drop the namespace (the last "::" before any template argument list) and a trailing "Impl".
  const auto template_open = cxx_name.find('<');
  const std::string head = cxx_name.substr(0, template_open);
  const auto colon = head.rfind("::");
  std::string s = colon == std::string::npos ? cxx_name : cxx_name.substr(colon + 2);
  const std::string impl = "Impl";
  if (s.size() > impl.size() && s.compare(s.size() - impl.size(), impl.size(), impl) == 0) {
    s.resize(s.size() - impl.size());
  }
  return s;
}

ModuleIndex::ModuleIndex(torch::nn::Module& root) { add(root, "", "", 0, -1); }

void ModuleIndex::add(torch::nn::Module& m, const std::string& name, const std::string& path,
                      int depth, int parent) {
  const int index = static_cast<int>(nodes_.size());
  {
    Node node;
    node.name = name;
    node.path = path;
    // A Linear subclass without children (the models' LoRA-capable LoraLinear, no adapter) is a Linear.
    const bool plain_linear = dynamic_cast<const torch::nn::LinearImpl*>(&m) != nullptr && m.children().empty();
    node.type_name = plain_linear ? "Linear" : short_type_name(m.name());
    node.extra_repr = extra_repr_of(m);
    node.depth = depth;
    node.parent = parent;
    node.params = count_params(m);
    node.builtin_leaf = (plain_linear || m.name().rfind("torch::nn::", 0) == 0) && m.children().empty();
    nodes_.push_back(std::move(node));
  }
  if (parent >= 0) nodes_[static_cast<size_t>(parent)].children.push_back(index);
  for (const auto& p : m.named_parameters(/*recurse=*/false)) {
    const at::Tensor& t = p.value();
    by_impl_.emplace(t.unsafeGetTensorImpl(), index);  // emplace keeps the first owner
    if (t.defined() && t.has_storage() && t.numel() > 0) by_data_.emplace(t.data_ptr(), index);
  }
  for (const auto& child : m.named_children()) {
    add(*child.value(), child.key(), path.empty() ? child.key() : path + "." + child.key(),
        depth + 1, index);
  }
}

int ModuleIndex::owner_of(const at::Tensor& t) const {
  if (!t.defined()) return -1;
  if (auto it = by_impl_.find(t.unsafeGetTensorImpl()); it != by_impl_.end()) return it->second;
  if (t.has_storage() && t.numel() > 0) {
    if (auto it = by_data_.find(t.data_ptr()); it != by_data_.end()) return it->second;
  }
  return -1;
}

int ModuleIndex::context_after(int last) const {
  if (last < 0 || static_cast<size_t>(last) >= nodes_.size()) return 0;
  const Node& n = nodes_[static_cast<size_t>(last)];
  return n.builtin_leaf && n.parent >= 0 ? n.parent : last;
}

ModuleProfile ModuleIndex::build(const std::vector<SelfCost>& self) const {
  ModuleProfile root;
  if (!nodes_.empty()) subtree_totals(nodes_, self, 0, root);
  return root;
}

}  // namespace ds::profiling
