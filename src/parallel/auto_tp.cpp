#include "parallel/auto_tp.h"

#include <fmt/format.h>

#include <algorithm>

#include "nn/tensor_buffer.h"
#include "parallel/vocab_range.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

std::string leaf_of(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

void broadcast_from_group_rank0(torch::nn::Module& module, comm::Communicator& tp) {
  if (tp.size() == 1) return;
  torch::NoGradGuard no_grad;
  auto send = [&](const torch::Tensor& t, const std::string& name) {
    if (!t.defined() || t.numel() == 0) return;
    DS_CHECK(t.is_contiguous(), NotSupported,
             fmt::format("AutoTP: '{}' is not contiguous; it cannot be broadcast over the tensor-parallel group", name));
    tp.broadcast(nn::as_buffer(t), 0, "auto_tp_broadcast");
  };
  for (const auto& item : module.named_parameters(true)) send(item.value(), item.key());
  for (const auto& item : module.named_buffers(true)) send(item.value(), item.key());
}

}  // namespace

TpPolicy TpPolicy::builtin() {
  using S = TpSplit;
  return TpPolicy{{
      {"c_attn", S::Column, 3}, {"c_fc", S::Column, 1}, {"c_proj", S::Row, 1},             // GPT-2
      {"q_proj", S::Column, 1}, {"k_proj", S::Column, 1}, {"v_proj", S::Column, 1},          // Llama, OPT
      {"gate_proj", S::Column, 1}, {"up_proj", S::Column, 1},                                // Llama
      {"o_proj", S::Row, 1}, {"down_proj", S::Row, 1},                                       // Llama
      {"fc1", S::Column, 1}, {"out_proj", S::Row, 1}, {"fc2", S::Row, 1},                    // OPT
  }};
}

const TpRule* TpPolicy::match(const std::string& layer_name) const {
  const std::string leaf = leaf_of(layer_name);
  for (const auto& r : rules)
    if (r.leaf == leaf) return &r;
  return nullptr;
}

const SplitParameter* AutoTpResult::find(std::string_view parameter) const {
  const auto it = std::lower_bound(split_parameters.begin(), split_parameters.end(), parameter,
                                   [](const SplitParameter& a, std::string_view b) { return a.name < b; });
  return it != split_parameters.end() && it->name == parameter ? &*it : nullptr;
}

void AutoTpResult::annotate(precision::GradientSpans& grads) const {
  grads.tp = tp;
  for (auto& piece : grads.pieces) piece.tp_split = is_split(piece.name);
}

void AutoTpResult::add_row_ranges(std::string parameter, int64_t rows) {
  SplitParameter s{std::move(parameter), TpSplit::Column, 1, rows};
  const auto at = std::lower_bound(split_parameters.begin(), split_parameters.end(), s.name,
                                   [](const SplitParameter& a, const std::string& b) { return a.name < b; });
  DS_ASSERT(at == split_parameters.end() || at->name != s.name, "AutoTP: " + s.name + " is cut twice");
  split_parameters.insert(at, std::move(s));
}

torch::Tensor AutoTpResult::gather_full(const std::string& parameter, const torch::Tensor& local) const {
  const SplitParameter* s = find(parameter);
  if (s == nullptr || tp == nullptr || tp->size() == 1) return local;
  torch::NoGradGuard no_grad;
  torch::Tensor mine = local.detach().to(torch::kCPU).contiguous();
  if (s->full_rows > 0) {  // uneven ranges: gather equal blocks padded to the largest, then trim each
    const int64_t most = vocab_range(s->full_rows, tp->size(), 0).size();
    if (mine.size(0) < most) mine = torch::cat({mine, torch::zeros_like(mine.narrow(0, 0, 1))});
    std::vector<int64_t> shape{tp->size()};
    shape.insert(shape.end(), mine.sizes().begin(), mine.sizes().end());
    torch::Tensor all = torch::empty(shape, mine.options());
    tp->all_gather(nn::as_buffer(mine), nn::as_buffer(all), "auto_tp_gather_full");
    std::vector<torch::Tensor> pieces;
    for (int r = 0; r < tp->size(); ++r) pieces.push_back(all[r].narrow(0, 0, vocab_range(s->full_rows, tp->size(), r).size()));
    return torch::cat(pieces, 0);
  }
  std::vector<int64_t> shape{tp->size()};
  shape.insert(shape.end(), mine.sizes().begin(), mine.sizes().end());
  torch::Tensor all = torch::empty(shape, mine.options());
  tp->all_gather(nn::as_buffer(mine), nn::as_buffer(all), "auto_tp_gather_full");
  std::vector<torch::Tensor> pieces;
  if (s->split == TpSplit::Row) {  // columns of the weight, in rank order
    for (int r = 0; r < tp->size(); ++r) pieces.push_back(all[r]);
    return torch::cat(pieces, 1);
  }
  // Column: each rank holds its slice of every fused block; the full tensor is block by block.
  const int64_t block = mine.size(0) / s->parts;
  for (int64_t p = 0; p < s->parts; ++p)
    for (int r = 0; r < tp->size(); ++r) pieces.push_back(all[r].narrow(0, p * block, block));
  return torch::cat(pieces, 0);
}

std::vector<int64_t> AutoTpResult::full_shape(std::string_view parameter, torch::IntArrayRef local) const {
  std::vector<int64_t> shape(local.begin(), local.end());
  const SplitParameter* s = find(parameter);
  if (s == nullptr || tp == nullptr) return shape;
  if (s->full_rows > 0) shape[0] = s->full_rows;
  else shape[s->split == TpSplit::Row ? 1 : 0] *= tp->size();
  return shape;
}

std::vector<AutoTpResult::Run> AutoTpResult::full_runs(std::string_view parameter, torch::IntArrayRef local,
                                                       int64_t offset, int64_t n) const {
  const SplitParameter* s = find(parameter);
  if (s == nullptr || tp == nullptr || tp->size() == 1 || n == 0) return {{offset, offset, n}};
  const int64_t world = tp->size(), rank = tp->rank();
  int64_t row_elems = 1;
  for (size_t d = 1; d < local.size(); ++d) row_elems *= local[d];
  if (s->full_rows > 0)  // one contiguous block of whole rows
    return {{offset, vocab_range(s->full_rows, tp->size(), tp->rank()).begin * row_elems + offset, n}};
  std::vector<Run> runs;
  if (s->split == TpSplit::Row) {  // local [O, I/tp] → whole [O, I]: each local row is one run
    const int64_t cols = local[1], full_cols = cols * world;
    for (int64_t at = offset, end = offset + n; at < end;) {
      const int64_t row = at / cols, col = at % cols, len = std::min(end - at, cols - col);
      runs.push_back({at, row * full_cols + rank * cols + col, len});
      at += len;
    }
    return runs;
  }
  // Column: local rows [O/tp, R...]: fused block p's rows block_rows·p .. hold whole rows
  // p·(O/parts) + rank·block_rows .. of the whole tensor.
  const int64_t block_rows = local[0] / s->parts, block = block_rows * row_elems;
  for (int64_t at = offset, end = offset + n; at < end;) {
    const int64_t p = at / block, within = at % block, len = std::min(end - at, block - within);
    runs.push_back({at, (p * block_rows * world + rank * block_rows) * row_elems + within, len});
    at += len;
  }
  return runs;
}

std::string AutoTpResult::summary() const {
  return fmt::format("{} column-parallel and {} row-parallel layers, {} split parameters", column_layers, row_layers,
                     split_parameters.size());
}

AutoTpResult apply_auto_tp(torch::nn::Module& module, comm::Communicator& tp, const TpPolicy& policy,
                           bool overlap_comm) {
  // Check every matching layer before anything changes, so a refused model is left whole.
  struct Cut {
    std::string name;
    TpLinearImpl* layer;
    const TpRule* rule;
  };
  std::vector<Cut> cuts;
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    const TpRule* rule = policy.match(item.key());
    if (rule == nullptr || rule->split == TpSplit::None) continue;
    auto* layer = dynamic_cast<TpLinearImpl*>(item.value().get());
    if (layer == nullptr) {
      if (dynamic_cast<torch::nn::LinearImpl*>(item.value().get()) != nullptr)
        throw NotSupported(fmt::format("tensor_parallel.autotp_size: layer '{}' is a plain torch::nn::Linear, which "
                                       "AutoTP cannot cut; declare it as ds::parallel::TpLinear (same parameters, "
                                       "same forward when not split)",
                                       item.key()));
      continue;  // a block that happens to share a projection's name
    }
    DS_CHECK(layer->children().empty(), NotSupported,
             fmt::format("tensor_parallel.autotp_size: layer '{}' carries a LoRA adapter; LoRA with AutoTP is not "
                         "supported (apply the adapter after training, or train it without tensor parallelism)",
                         item.key()));
    cuts.push_back({item.key(), layer, rule});
  }
  if (cuts.empty())
    throw ConfigError("tensor_parallel.autotp_size",
                      fmt::format("{}: the model has no layer AutoTP can split (no TpLinear named {}); declare the "
                                  "model's projections as ds::parallel::TpLinear or pass a TpPolicy that names them",
                                  tp.size(), [&] {
                                    std::string names;
                                    for (const auto& r : policy.rules) names += (names.empty() ? "" : ", ") + r.leaf;
                                    return names;
                                  }()));
  for (const auto& c : cuts) {  // sizes first: an error leaves every layer whole
    const int64_t n = c.rule->split == TpSplit::Column ? c.layer->weight.size(0) : c.layer->weight.size(1);
    (void)column_slice(torch::empty({n}, torch::kInt8), c.rule->split == TpSplit::Column ? c.rule->parts : 1,
                       tp.size(), 0, c.name, c.rule->split == TpSplit::Column ? "out_features" : "in_features",
                       c.layer->shard_unit());
  }

  broadcast_from_group_rank0(module, tp);
  AutoTpResult result;
  result.tp = &tp;
  for (const auto& c : cuts) {
    result.split_parameters.push_back({c.name + ".weight", c.rule->split, c.rule->parts});
    if (c.rule->split == TpSplit::Column) {
      c.layer->shard_columns(tp, ColumnParallelOptions{.name = c.name, .parts = c.rule->parts});
      c.layer->set_overlap_comm(overlap_comm);
      if (c.layer->bias.defined()) result.split_parameters.push_back({c.name + ".bias", TpSplit::Column, c.rule->parts});
      result.column_layers += 1;
    } else {
      c.layer->shard_rows(tp, RowParallelOptions{.name = c.name});
      result.row_layers += 1;
    }
  }
  std::sort(result.split_parameters.begin(), result.split_parameters.end(),
            [](const SplitParameter& a, const SplitParameter& b) { return a.name < b.name; });
  return result;
}

}  // namespace ds::parallel
