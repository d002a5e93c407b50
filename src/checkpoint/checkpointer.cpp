#include "checkpoint/checkpointer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ATen/CPUGeneratorImpl.h>

#include <exception>
#include <filesystem>
#include <map>
#include <unordered_set>

#include "checkpoint/layout.h"
#include "checkpoint/manifest.h"
#include "checkpoint/state_files.h"
#include "comm/agreement.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::checkpoint {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Trainable parameters by name (the first name of a shared tensor), in model order, as the
// engine's parameter collection sees them. Stage-3 placeholders keep their shapes. Under tensor
// parallelism the shapes are the whole tensors' (what the checkpoint holds).
std::vector<ParamInfo> trainable_params(const EngineStates& p) {
  std::vector<ParamInfo> out;
  std::unordered_set<const void*> seen;
  const std::string dtype(format::dtype_name(st_dtype_of(p.model_dtype)));
  for (const auto& item : p.module.named_parameters())
    if (item.value().requires_grad() && seen.insert(item.value().unsafeGetTensorImpl()).second)
      out.push_back({item.key(),
                     p.tensor_parallel ? p.tensor_parallel->full_shape(item.key(), item.value().sizes())
                                       : item.value().sizes().vec(),
                     dtype});
  return out;
}

// Pipeline stages: every rank's trainable parameters, the first occurrence of each name in rank
// order (stage 0's ranks come first, so this is the model's order). Collective over p.comm.
std::vector<ParamInfo> all_trainable_params(const EngineStates& p) {
  std::vector<ParamInfo> mine = trainable_params(p);
  if (!p.pipeline) return mine;
  json list = json::array();
  for (const auto& info : mine) list.push_back({info.name, info.shape, info.dtype});
  std::vector<ParamInfo> out;
  std::unordered_set<std::string> seen;
  for (const auto& text : comm::all_gather_text(p.comm, list.dump(), "checkpoint_params"))
    for (const auto& e : json::parse(text))
      if (seen.insert(e[0].get<std::string>()).second)
        out.push_back({e[0].get<std::string>(), e[1].get<std::vector<int64_t>>(), e[2].get<std::string>()});
  return out;
}

// This rank's (sliced) parameter shapes by name, for mapping its pieces onto whole tensors.
std::map<std::string, std::vector<int64_t>> local_shapes(torch::nn::Module& module) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& item : module.named_parameters()) out.emplace(item.key(), item.value().sizes().vec());
  return out;
}

// Under tensor parallelism: `layout`'s slots re-cut into runs of whole tensors (param_offset in the
// whole tensor's elements, offset still into this rank's span), replicated parameters kept only on
// tensor-parallel rank 0, so the ranks' pieces tile each whole tensor once.
zero::FlatGroup whole_tensor_layout(const EngineStates& p, const zero::FlatGroup& layout,
                                    const std::map<std::string, std::vector<int64_t>>& shapes) {
  const parallel::AutoTpResult& tp = *p.tensor_parallel;
  zero::FlatGroup out;
  out.param_group = layout.param_group;
  out.dtype = layout.dtype;
  out.numel = layout.numel;
  out.padded_numel = layout.padded_numel;
  for (const auto& slot : layout.slots) {
    if (!tp.is_split(slot.name) && tp.tp_rank() != 0) continue;
    for (const auto& run : tp.full_runs(slot.name, shapes.at(slot.name), slot.param_offset, slot.numel)) {
      zero::ParamSlot piece;
      piece.name = slot.name;
      piece.offset = slot.offset + (run.local_offset - slot.param_offset);
      piece.numel = run.numel;
      piece.param_offset = run.full_offset;
      out.slots.push_back(std::move(piece));
    }
  }
  return out;
}

// What tensor-parallel checkpoints cannot hold yet: refused before anything is
// written or read.
void check_tensor_parallel_support(const EngineStates& p) {
  if (!p.tensor_parallel) return;
  DS_CHECK(!(p.optimizer && p.optimizer->swapped()), NotSupported,
           "tensor_parallel.autotp_size: checkpoints with the optimizer state on NVMe (offload_optimizer.device "
           "\"nvme\") under AutoTP are not supported yet; nothing was written or read");
  for (const auto& item : p.module.named_parameters())
    DS_CHECK(item.value().requires_grad() || !p.tensor_parallel->is_split(item.key()), NotSupported,
             fmt::format("tensor_parallel.autotp_size: {} is a frozen tensor-parallel slice; checkpoints hold frozen "
                         "parameters whole, so it cannot be saved yet (train it, or save_16bit_model)",
                         item.key()));
}

// What the optimizer does not own: frozen parameters and buffers (whole on every rank).
std::vector<std::pair<std::string, torch::Tensor>> module_tensors(torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : module.named_parameters())
    if (item.value().requires_grad()) seen.insert(item.value().unsafeGetTensorImpl());
  for (const auto& item : module.named_parameters())
    if (!item.value().requires_grad() && seen.insert(item.value().unsafeGetTensorImpl()).second)
      out.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers())
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) out.emplace_back(item.key(), item.value());
  return out;
}

// Which frozen parameters and buffers each model file holds: rank 0's model file all of them, or with
// pipeline stages one file per stage, each name in the first stage that holds it (a frozen tied
// embedding once). Collective over p.comm with stages.
struct ModelFiles {
  std::vector<StageModelFile> files;  // [0]: model_file_name(); the stages' after it (none empty)
  int mine = -1;                      // the entry this rank writes; -1: none
};

ModelFiles assign_model_files(const EngineStates& p) {
  ModelFiles out;
  std::vector<std::string> names;
  for (const auto& [name, t] : module_tensors(p.module)) names.push_back(name);
  if (!p.pipeline) {
    out.files.push_back({model_file_name(), std::move(names)});
    if (p.comm.rank() == 0) out.mine = 0;
    return out;
  }
  // One rank of each stage (world rank 0's pipe group) speaks for it; the others send nothing.
  const int stage = p.stage_leaders ? p.stage_leaders->rank() : -1;
  const json mine{{"stage", stage}, {"names", p.stage_leaders ? json(names) : json::array()}};
  std::map<int, std::vector<std::string>> by_stage;
  for (const auto& text : comm::all_gather_text(p.comm, mine.dump(), "checkpoint_model_files")) {
    const json e = json::parse(text);
    if (e["stage"].get<int>() >= 0) by_stage[e["stage"].get<int>()] = e["names"].get<std::vector<std::string>>();
  }
  std::unordered_set<std::string> taken;
  for (const auto& [s, held] : by_stage) {
    StageModelFile f{s == 0 ? model_file_name() : stage_model_file_name(s), {}};
    for (const auto& n : held)
      if (taken.insert(n).second) f.tensors.push_back(n);
    if (s > 0 && f.tensors.empty()) continue;
    if (s == stage) out.mine = int(out.files.size());
    out.files.push_back(std::move(f));
  }
  return out;
}

torch::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Reads [offset, offset + n) of a state into `span` (fp32, any device) through host memory; `runs`
// place the slot's elements in the saved (whole) tensor: one run without tensor parallelism.
void read_span(SliceReader& reader, const std::string& state, const ParamEntry& entry, const zero::ParamSlot& slot,
               const std::vector<parallel::AutoTpResult::Run>& runs, const torch::Tensor& span) {
  torch::Tensor dst = span.narrow(0, slot.offset, slot.numel);
  const bool direct = dst.device().is_cpu() && dst.is_contiguous();
  torch::Tensor host = direct ? dst : torch::empty({slot.numel}, torch::kFloat32);
  for (const auto& run : runs)
    reader.read(state, entry, run.full_offset, run.numel, host.data_ptr<float>() + (run.local_offset - slot.param_offset));
  if (!direct) dst.copy_(host);
}

// The 1-bit optimizers' error buffers, one set per rank: restored at the world size they were saved
// at; elsewhere their ranks' shares do not exist any more, so they restart from zero (DeepSpeed resets
// them on every load).
constexpr const char* kOneBitErrors = "onebit_errors";

void restore_rank_private(const EngineStates& p, SliceReader& reader, const Manifest& m) {
  if (!p.optimizer || !p.optimizer->compressed()) return;
  torch::Tensor saved;
  if (m.dp_world_size == p.comm.size()) saved = reader.rank_private(p.comm.rank(), kOneBitErrors);
  if (!p.optimizer->load_rank_state(saved))
    log::info("load_checkpoint: the {} error buffers restart from zero (saved at world {}, loaded at world {})",
              to_string(p.optimizer->type()), m.dp_world_size, p.comm.size());
}

void check_tag_agreement(const EngineStates& p, const std::string& tag) {
  if (p.comm.size() == 1 || p.config.checkpoint.tag_validation == TagValidation::Ignore) return;
  const int64_t digest = static_cast<int64_t>(tag_digest(tag) >> 1);
  int64_t lo = digest, hi = digest;
  p.comm.all_reduce(comm::Buffer(&lo, 1), comm::ReduceOp::Min, "checkpoint_tag");
  p.comm.all_reduce(comm::Buffer(&hi, 1), comm::ReduceOp::Max, "checkpoint_tag");
  if (lo == hi) return;
  const std::string msg = fmt::format(
      "checkpoint.tag_validation: ranks passed different tags to save_checkpoint (this rank: \"{}\"); every "
      "rank must save the same tag",
      tag);
  if (p.config.checkpoint.tag_validation == TagValidation::Fail) throw Error(msg);
  log::warn("{}", msg);
}

// This rank's rank file (and rank 0's model file) in the partial directory; returns their checksums.
std::map<std::string, format::FileChecksums> write_files(const EngineStates& p, const std::string& partial,
                                                         const std::vector<std::string>& rank_files,
                                                         const ModelFiles& model_files) {
  torch::NoGradGuard no_grad;
  std::map<std::string, format::FileChecksums> checksums;
  const int rank = p.comm.rank(), world = p.comm.size();
  const std::string& name = rank_files[size_t(rank)];
  const std::string file = (fs::path(partial) / name).string();
  // Under tensor parallelism the layouts in whole-tensor runs; in a pipeline without the tied copies
  // another stage writes.
  const bool adjusted = p.tensor_parallel || !p.pipeline_copies.empty();
  std::vector<zero::FlatGroup> whole;
  if (adjusted) {
    const auto shapes = local_shapes(p.module);
    const std::unordered_set<std::string> copies(p.pipeline_copies.begin(), p.pipeline_copies.end());
    for (size_t g = 0; g < p.states.num_groups(); ++g) {
      zero::FlatGroup l = p.tensor_parallel ? whole_tensor_layout(p, p.states.local_layout(g), shapes)
                                            : p.states.local_layout(g);
      std::erase_if(l.slots, [&](const zero::ParamSlot& slot) { return copies.count(slot.name) > 0; });
      whole.push_back(std::move(l));
    }
  }
  auto layout = [&](size_t g) { return adjusted ? &whole[g] : &p.states.local_layout(g); };
  if (p.optimizer && p.optimizer->swapped()) {
    // ZeRO-Infinity: stream the swap files sub-group by sub-group (RAM: one sub-group).
    std::vector<const zero::FlatGroup*> layouts;
    for (size_t g = 0; g < p.states.num_groups(); ++g) layouts.push_back(layout(g));
    std::vector<SwappedSpan> spans;
    for (const auto& sp : p.optimizer->sub_group_spans()) spans.push_back({sp.group, sp.offset, sp.numel});
    zero::FlatOptimizer* opt = p.optimizer;
    checksums[name] = write_swapped_rank_file(
        file, layouts, opt->state_names(), spans,
        [opt](size_t k, std::span<float* const> st) { opt->read_sub_group(int64_t(k), st); }, cpu_rng_state(), rank,
        world);
  } else {
    LocalStates local;
    if (p.optimizer) local.state_names = p.optimizer->state_names();
    for (size_t g = 0; g < p.states.num_groups(); ++g) {
      local.layouts.push_back(layout(g));
      local.masters.push_back(p.optimizer ? p.optimizer->master(g) : p.states.local_params(g).to(torch::kFloat32));
      local.states.push_back(p.optimizer ? &p.optimizer->state(g) : nullptr);
    }
    // Stage 0 replicas are identical: data-parallel rank 0 writes the pieces, every rank its RNG state.
    const bool pieces = p.states.partitioned() || (p.data ? p.data->rank() : rank) == 0;
    std::vector<std::pair<std::string, torch::Tensor>> private_tensors;
    if (p.optimizer) {
      if (torch::Tensor errors = p.optimizer->rank_state(); errors.defined())
        private_tensors.emplace_back(kOneBitErrors, errors);
    }
    checksums[name] = write_rank_file(file, local, pieces, cpu_rng_state(), rank, world, private_tensors);
  }
  crash_point("rank_file", rank);
  if (model_files.mine >= 0) {
    const StageModelFile& f = model_files.files[size_t(model_files.mine)];
    const std::unordered_set<std::string> wanted(f.tensors.begin(), f.tensors.end());
    auto tensors = module_tensors(p.module);
    std::erase_if(tensors, [&](const auto& named) { return !wanted.count(named.first); });
    checksums[f.file] = write_tensor_file((fs::path(partial) / f.file).string(), tensors,
                                          {{"format", "deepspeed.cpp model states"}});
    crash_point("model_file", rank);
  }
  return checksums;
}

// Rank 0: the manifest (with every rank's checksums), then the atomic commit and `latest`.
void commit(const EngineStates& p, const SaveRequest& r, const std::vector<std::string>& rank_files,
            const ModelFiles& model_files, const std::vector<std::string>& all_checksums,
            const std::vector<ParamInfo>& params) {
  const std::string partial = partial_dir(r.dir, r.tag);
  Manifest m;
  m.tag = r.tag;
  m.zero_stage = p.states.stage();
  m.dp_world_size = p.comm.size();
  m.rank_files = rank_files;
  m.model_file = model_file_name();
  m.states = {kMasterState};
  if (p.optimizer)
    for (const auto& name : p.optimizer->state_names()) m.states.push_back(name);
  m.module_tensors = model_files.files.front().tensors;
  m.stage_model_files.assign(model_files.files.begin() + 1, model_files.files.end());
  m.params = collect_pieces(partial, rank_files, params);
  m.engine = r.engine_state;
  m.ds_config = json::parse(p.config.json_text, nullptr, false);
  m.client_state = r.client_state;
  for (size_t rank = 0; rank < all_checksums.size(); ++rank) {
    const json theirs = json::parse(all_checksums[rank]);
    for (const auto& [file, sums] : theirs.items())
      m.checksums[file] = format::file_checksums_from_json(sums, fmt::format("rank {}'s checksums of {}", rank, file));
  }
  const std::string path = (fs::path(partial) / kManifestFile).string();
  (void)manifest_from_json(to_json(m), path);  // what we write must load
  write_manifest(m, path);
  crash_point("manifest", 0);
  commit_tag_dir(r.dir, r.tag);
  crash_point("commit", 0);
  if (r.save_latest) write_latest(r.dir, r.tag);
}

}  // namespace

json batch_json(const Config& c) {
  return {{"train_batch_size", c.train_batch_size}, {"train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu},
          {"gradient_accumulation_steps", c.gradient_accumulation_steps}, {"dp_world_size", c.data_parallel_size}};
}

void warn_if_global_batch_changed(const json& engine_state, const Config& c, const std::string& path) {
  if (!engine_state.contains("batch")) return;  // saved before the triple was recorded
  const json& b = engine_state.at("batch");
  const int64_t saved = b.value("train_batch_size", int64_t{0});
  if (saved == c.train_batch_size) return;  // a reshard that keeps the global batch changes nothing
  log::warn(
      "load_checkpoint: the global batch changed: {} was saved with train_batch_size {} (micro batch {} x "
      "gradient_accumulation_steps {} x data-parallel world {}), this run uses {} ({} x {} x {}). Each optimizer step "
      "now consumes {} samples instead of {}: the data order from here on differs from the saved run's, and the "
      "learning-rate schedule (stepped per optimizer step) now moves per {} samples, so the schedule per sample "
      "changes. To continue exactly, keep train_batch_size at {} (set gradient_accumulation_steps or the micro batch "
      "for this world size)",
      path, saved, b.value("train_micro_batch_size_per_gpu", int64_t{0}), b.value("gradient_accumulation_steps", int64_t{0}),
      b.value("dp_world_size", 0), c.train_batch_size, c.train_micro_batch_size_per_gpu, c.gradient_accumulation_steps,
      c.data_parallel_size, c.train_batch_size, saved, c.train_batch_size, saved);
}

void check_save_at_boundary(int64_t micro_steps, int64_t gas) {
  DS_CHECK(micro_steps % gas == 0, Error,
           fmt::format("save_checkpoint: call it after engine.step() at a gradient accumulation boundary (this is "
                       "micro-step {} of {}); gradients of an unfinished step are not saved",
                       micro_steps % gas, gas));
}

std::string save(const EngineStates& p, const SaveRequest& r) {
  check_tensor_parallel_support(p);
  check_tag(r.tag);
  check_tag_agreement(p, r.tag);
  // Every phase ends with an agreement: one rank's failure fails the save on all, naming the cause.
  auto phase = [&](const char* what, auto&& fn) {
    std::exception_ptr error;
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
    try {
      comm::agree_or_throw(p.comm, error, what);
    } catch (...) {
      std::error_code ec;
      if (p.comm.rank() == 0) fs::remove_all(partial_dir(r.dir, r.tag), ec);  // nothing half-written stays behind
      throw;
    }
  };
  std::vector<std::string> rank_files;
  for (int rank = 0; rank < p.comm.size(); ++rank) rank_files.push_back(optim_file_name(rank, p.config.bf16.enabled));
  const ModelFiles model_files = assign_model_files(p);
  std::map<std::string, format::FileChecksums> checksums;
  phase("checkpoint_prepare", [&] {
    if (p.comm.rank() == 0) prepare_partial_dir(r.dir, r.tag);
  });
  phase("checkpoint_write", [&] { checksums = write_files(p, partial_dir(r.dir, r.tag), rank_files, model_files); });
  phase("checkpoint_commit", [&] {
    json mine = json::object();
    for (const auto& [file, sums] : checksums) mine[file] = format::to_json(sums);
    const auto all = comm::all_gather_text(p.comm, mine.dump(), "checkpoint_checksums");
    const auto params = all_trainable_params(p);
    if (p.comm.rank() == 0) commit(p, r, rank_files, model_files, all, params);
  });
  return tag_dir(r.dir, r.tag);
}

namespace {

// The checkpoint holds every trainable parameter of the model with its shape, and the states this
// run's optimizer needs; strict: nothing the model lacks.
void check_compatible(const EngineStates& p, const Manifest& m, const std::string& path, const LoadOptions& options,
                      const std::vector<std::string>& state_names) {
  std::unordered_set<std::string> ours;
  for (const auto& param : trainable_params(p)) {
    ours.insert(param.name);
    const ParamEntry* e = m.find(param.name);
    DS_CHECK(e != nullptr, IoError,
             fmt::format("{}: the checkpoint has no parameter {} (a checkpoint of another model?)", path, param.name));
    DS_CHECK(e->shape == param.shape, IoError,
             fmt::format("{}: {} has shape {} in the checkpoint but {} in the model", path, param.name, e->shape,
                         param.shape));
  }
  if (options.load_module_strict && !p.pipeline)  // a stage holds only its part of the model
    for (const auto& e : m.params)
      DS_CHECK(ours.count(e.name), IoError,
               fmt::format("{}: the checkpoint's parameter {} is not a trainable parameter of the model (pass "
                           "load_module_strict = false to ignore it)",
                           path, e.name));
  for (const auto& s : state_names)
    DS_CHECK(std::find(m.states.begin(), m.states.end(), s) != m.states.end(), IoError,
             fmt::format("{}: the checkpoint holds optimizer states {} but this run's {} needs \"{}\" (load with "
                         "load_optimizer_states = false to start the optimizer afresh)",
                         path, m.states, to_string(p.optimizer->type()), s));
}

// zero_optimization.load_from_fp32_weights false (DeepSpeed's _restore_from_bit16_weights, stages
// 0-2): the master restarts from the 16-bit weights, i.e. the checkpoint's master rounded to the
// model's dtype (the 16-bit parameters are that rounding). Stage 3 always loads its fp32 partitions,
// as DeepSpeed's does; with fp32 parameters there is nothing to round.
bool master_from_16bit(const EngineStates& p) {
  return !p.config.zero_optimization.load_from_fp32_weights && p.config.zero_optimization.stage != 3 &&
         p.model_dtype != torch::kFloat32;
}

void round_to(torch::Tensor& master, torch::ScalarType dtype) { master.copy_(master.to(dtype)); }

// ZeRO-Infinity: fill the swap files sub-group by sub-group, handing each master span to the 16-bit
// write-back as it goes (finished once every rank has read its slices).
void read_swapped(const EngineStates& p, SliceReader& reader, const Manifest& m, bool with_states, bool from_16bit) {
  zero::FlatOptimizer& opt = *p.optimizer;
  std::vector<std::string> names{kMasterState};
  for (const auto& n : opt.state_names()) names.push_back(n);
  const auto spans = opt.sub_group_spans();
  for (size_t k = 0; k < spans.size(); ++k) {
    const auto& sp = spans[k];
    std::vector<torch::Tensor> buf;
    for (size_t j = 0; j < names.size(); ++j) buf.push_back(torch::zeros({sp.numel}));
    if (!with_states) {  // weights only: keep the swapped moments, read back around the new master
      std::vector<float*> ptrs;
      for (auto& t : buf) ptrs.push_back(t.data_ptr<float>());
      opt.read_sub_group(int64_t(k), ptrs);
      buf[0].zero_();  // the master comes from the checkpoint (padding stays zero)
    }
    for (const auto& slot : p.states.local_layout(sp.group).slots) {
      const int64_t lo = std::max(slot.offset, sp.offset), hi = std::min(slot.offset + slot.numel, sp.offset + sp.numel);
      if (lo >= hi) continue;
      const ParamEntry& e = *m.find(slot.name);
      for (size_t j = 0; j < (with_states ? names.size() : 1); ++j)
        reader.read(names[j], e, slot.param_offset + (lo - slot.offset), hi - lo, buf[j].data_ptr<float>() + (lo - sp.offset));
    }
    if (from_16bit) round_to(buf[0], p.model_dtype);
    std::vector<const float*> ptrs;
    for (const auto& t : buf) ptrs.push_back(t.data_ptr<float>());
    opt.write_sub_group(int64_t(k), ptrs);
    p.states.write_back_range(sp.group, sp.offset, buf[0]);
  }
}

// Every group's fp32 master (the optimizer's own tensors, filled in place, or a copy of the
// parameters without one) and optimizer states.
std::vector<torch::Tensor> read_flat(const EngineStates& p, SliceReader& reader, const Manifest& m,
                                     const std::vector<std::string>& state_names) {
  std::vector<torch::Tensor> masters;
  const auto shapes = p.tensor_parallel ? local_shapes(p.module) : std::map<std::string, std::vector<int64_t>>{};
  for (size_t g = 0; g < p.states.num_groups(); ++g) {
    torch::Tensor master = p.optimizer ? p.optimizer->master(g) : p.states.local_params(g).to(torch::kFloat32);
    for (const auto& slot : p.states.local_layout(g).slots) {
      if (slot.numel == 0) continue;
      const ParamEntry& e = *m.find(slot.name);
      const auto runs = p.tensor_parallel
                            ? p.tensor_parallel->full_runs(slot.name, shapes.at(slot.name), slot.param_offset, slot.numel)
                            : std::vector<parallel::AutoTpResult::Run>{{slot.param_offset, slot.param_offset, slot.numel}};
      read_span(reader, kMasterState, e, slot, runs, master);
      for (const auto& s : state_names) read_span(reader, s, e, slot, runs, p.optimizer->state(g).at(s));
    }
    masters.push_back(master);
  }
  return masters;
}

void read_module_tensors(const EngineStates& p, SliceReader& reader, const Manifest& m, const std::string& path,
                         bool strict) {
  for (auto& [name, t] : module_tensors(p.module)) {
    if (m.module_file_of(name) != nullptr)
      reader.read_module_tensor(name, t);
    else
      DS_CHECK(!strict, IoError,
               fmt::format("{}: the checkpoint has no {} (a frozen parameter or buffer of the model)", path, name));
  }
}

}  // namespace

std::optional<Loaded> load(const EngineStates& p, const std::string& dir, const std::string& tag_in,
                           const LoadOptions& options) {
  std::string tag = tag_in;
  if (tag.empty()) {
    auto latest = read_latest(dir);
    if (!latest) {
      log::warn("load_checkpoint: there is no {}, so nothing was loaded (pass a tag to load a specific checkpoint)",
                (fs::path(dir) / kLatestFile).string());
      return std::nullopt;
    }
    tag = *latest;
  }
  check_tag(tag);
  check_tensor_parallel_support(p);
  const std::string path = resolve_tag_dir(dir, tag);
  const Manifest m = read_manifest((fs::path(path) / kManifestFile).string());
  const bool with_states = p.optimizer && options.load_optimizer_states && !options.load_module_only;
  const bool swapped = p.optimizer && p.optimizer->swapped();
  std::vector<std::string> state_names;
  if (with_states) state_names = p.optimizer->state_names();
  std::vector<torch::Tensor> masters;
  std::exception_ptr error;
  try {
    check_compatible(p, m, path, options, state_names);
    torch::NoGradGuard no_grad;
    SliceReader reader(path, m);
    const bool from_16bit = master_from_16bit(p);
    if (swapped) read_swapped(p, reader, m, with_states, from_16bit);
    else masters = read_flat(p, reader, m, state_names);
    if (from_16bit)
      for (auto& master : masters) round_to(master, p.model_dtype);
    read_module_tensors(p, reader, m, path, options.load_module_strict);
    if (!options.load_module_only) {
      torch::Tensor rng = reader.rng_state(p.comm.rank() % m.dp_world_size);
      if (rng.defined()) set_cpu_rng_state(rng);
    }
    if (with_states) restore_rank_private(p, reader, m);
  } catch (...) {
    error = std::current_exception();
  }
  // write_back gathers across ranks: every rank must have read its slices first.
  comm::agree_or_throw(p.comm, error, "checkpoint_load");
  if (swapped) p.states.finish_write_back();
  else p.states.write_back(masters);
  return Loaded{path, m.engine, m.client_state, m.dp_world_size, m.zero_stage};
}

}  // namespace ds::checkpoint
