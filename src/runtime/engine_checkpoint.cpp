// Engine::save_checkpoint / load_checkpoint / save_16bit_model: the sequence across ranks. The
// files are the checkpoint component's (checkpoint/layout.h, manifest.h, state_files.h); here the
// engine decides what goes in them and keeps the ranks in step, so that a failure on any rank
// fails the save everywhere with the cause named and leaves the previous checkpoint untouched.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ATen/CPUGeneratorImpl.h>

#include <exception>
#include <filesystem>
#include <unordered_set>

#include "checkpoint/layout.h"
#include "checkpoint/manifest.h"
#include "checkpoint/state_files.h"
#include "runtime/engine.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Trainable parameters by name (the first name of a shared tensor), in model order, as the
// engine's parameter collection sees them. Stage-3 placeholders keep their shapes.
std::vector<checkpoint::ParamInfo> trainable_params(torch::nn::Module& module, torch::ScalarType model_dtype) {
  std::vector<checkpoint::ParamInfo> out;
  std::unordered_set<const void*> seen;
  const std::string dtype(format::dtype_name(checkpoint::st_dtype_of(model_dtype)));
  for (const auto& item : module.named_parameters())
    if (item.value().requires_grad() && seen.insert(item.value().unsafeGetTensorImpl()).second)
      out.push_back({item.key(), item.value().sizes().vec(), dtype});
  return out;
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

json scaler_json(const precision::LossScalerState& s) {
  return {{"kind", int(s.kind)}, {"cur_scale", s.cur_scale}, {"cur_iter", s.cur_iter},
          {"last_overflow_iter", s.last_overflow_iter}, {"scale_factor", s.scale_factor},
          {"scale_window", s.scale_window}, {"min_scale", s.min_scale}, {"delayed_shift", s.delayed_shift},
          {"cur_hysteresis", s.cur_hysteresis}, {"consecutive_hysteresis", s.consecutive_hysteresis},
          {"raise_error_at_min_scale", s.raise_error_at_min_scale}};
}

precision::LossScalerState scaler_from_json(const json& j) {
  precision::LossScalerState s;
  s.kind = static_cast<precision::ScalerKind>(j.at("kind").get<int>());
  s.cur_scale = j.at("cur_scale");
  s.cur_iter = j.at("cur_iter");
  s.last_overflow_iter = j.at("last_overflow_iter");
  s.scale_factor = j.at("scale_factor");
  s.scale_window = j.at("scale_window");
  s.min_scale = j.at("min_scale");
  s.delayed_shift = j.at("delayed_shift");
  s.cur_hysteresis = j.at("cur_hysteresis");
  s.consecutive_hysteresis = j.at("consecutive_hysteresis");
  s.raise_error_at_min_scale = j.at("raise_error_at_min_scale");
  return s;
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

// Reads [offset, offset + n) of a state into `span` (fp32, any device) through host memory.
void read_span(checkpoint::SliceReader& reader, const std::string& state, const checkpoint::ParamEntry& entry,
               const zero::ParamSlot& slot, const torch::Tensor& span) {
  torch::Tensor dst = span.narrow(0, slot.offset, slot.numel);
  if (dst.device().is_cpu() && dst.is_contiguous()) {
    reader.read(state, entry, slot.param_offset, slot.numel, dst.data_ptr<float>());
    return;
  }
  torch::Tensor host = torch::empty({slot.numel}, torch::kFloat32);
  reader.read(state, entry, slot.param_offset, slot.numel, host.data_ptr<float>());
  dst.copy_(host);
}

// Every rank's `text`, on every rank (all_gather of the lengths, then of the texts padded to the longest).
std::vector<std::string> all_gather_text(comm::Communicator& comm, const std::string& text, const char* what) {
  const int world = comm.size();
  if (world == 1) return {text};
  int64_t mine = static_cast<int64_t>(text.size());
  std::vector<int64_t> lengths(size_t(world), 0);
  comm.all_gather(comm::ConstBuffer(&mine, 1), comm::Buffer(lengths.data(), world), what);
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<uint8_t> padded(size_t(longest), 0), all(size_t(longest) * size_t(world), 0);
  std::copy(text.begin(), text.end(), padded.begin());
  comm.all_gather(comm::ConstBuffer(padded.data(), longest), comm::Buffer(all.data(), longest * world), what);
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) {
    const auto* at = reinterpret_cast<const char*>(all.data()) + size_t(r) * size_t(longest);
    out.emplace_back(at, size_t(lengths[size_t(r)]));
  }
  return out;
}

// The batch triple a checkpoint was trained with, and what changes when a resume uses another.
json batch_json(const Config& c) {
  return {{"train_batch_size", c.train_batch_size}, {"train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu},
          {"gradient_accumulation_steps", c.gradient_accumulation_steps}, {"dp_world_size", c.world_size}};
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
      c.world_size, c.train_batch_size, saved, c.train_batch_size, saved);
}

}  // namespace

void Engine::agree_or_throw(std::exception_ptr error, const std::string& what) {
  if (world_size() == 1) {
    if (error) std::rethrow_exception(error);
    return;
  }
  // The lowest failing rank's message reaches every rank, so each one's error names the cause.
  int32_t failed = error ? rank() : world_size();
  comm_->all_reduce(comm::Buffer(&failed, 1), comm::ReduceOp::Min, what);
  if (failed == world_size()) return;
  std::string message;
  if (rank() == failed) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown error";
    }
  }
  int64_t length = static_cast<int64_t>(message.size());
  comm_->broadcast(comm::Buffer(&length, 1), failed);
  message.resize(static_cast<size_t>(length));
  comm_->broadcast(comm::Buffer(reinterpret_cast<uint8_t*>(message.data()), length), failed);
  if (error) std::rethrow_exception(error);
  throw IoError(fmt::format("{} (on rank {})", message, failed));
}

void Engine::check_tag_agreement(const std::string& tag) {
  if (world_size() == 1 || config_.checkpoint.tag_validation == TagValidation::Ignore) return;
  const int64_t digest = static_cast<int64_t>(checkpoint::tag_digest(tag) >> 1);
  int64_t lo = digest, hi = digest;
  comm_->all_reduce(comm::Buffer(&lo, 1), comm::ReduceOp::Min, "checkpoint_tag");
  comm_->all_reduce(comm::Buffer(&hi, 1), comm::ReduceOp::Max, "checkpoint_tag");
  if (lo == hi) return;
  const std::string msg = fmt::format(
      "checkpoint.tag_validation: ranks passed different tags to save_checkpoint (this rank: \"{}\"); every "
      "rank must save the same tag",
      tag);
  if (config_.checkpoint.tag_validation == TagValidation::Fail) throw Error(msg);
  log::warn("{}", msg);
}

json Engine::engine_state_json() const {
  json st = {{"global_steps", global_steps_}, {"global_samples", global_samples_},
             {"skipped_steps", skipped_steps_}, {"micro_steps", micro_steps_},
             {"loss_scaler", scaler_json(scaler_->state())}, {"batch", batch_json(config_)}};
  if (scheduler_) st["lr_scheduler"] = {{"last_batch_iteration", scheduler_->last_batch_iteration()}};
  if (optimizer_) {
    const auto a = optimizer_->adam_state();
    st["optimizer"] = {{"type", to_string(optimizer_->type())}, {"step", optimizer_->step_count()},
                       {"adam", {{"step", a.step}, {"beta1", a.beta1}, {"beta2", a.beta2},
                                 {"beta1_t", a.beta1_t}, {"beta2_t", a.beta2_t}}}};
  }
  return st;
}

void Engine::restore_engine_state(const json& st, const LoadOptions& options) {
  global_steps_ = st.at("global_steps");
  global_samples_ = st.at("global_samples");
  skipped_steps_ = st.at("skipped_steps");
  micro_steps_ = global_steps_ * config_.gradient_accumulation_steps;  // saved at a boundary
  loss_accum_ = 0.0;
  const auto scaler = scaler_from_json(st.at("loss_scaler"));
  if (scaler.kind == scaler_->kind())
    scaler_->load_state(scaler);
  else
    log::warn("load_checkpoint: the checkpoint's loss scaler is of another kind than this config's (fp16 settings "
              "changed); keeping this run's scaler at scale {}",
              scaler_->scale());
  if (optimizer_ && options.load_optimizer_states && st.contains("optimizer")) {
    const json& o = st.at("optimizer");
    const json& a = o.at("adam");
    optimizer_->restore_counters(o.at("step"), {a.at("step"), a.at("beta1"), a.at("beta2"), a.at("beta1_t"), a.at("beta2_t")});
  }
  if (scheduler_ && options.load_lr_scheduler_states && st.contains("lr_scheduler")) {
    scheduler_->step_to(st.at("lr_scheduler").at("last_batch_iteration"));
    apply_schedule();
  }
}

std::string Engine::save_checkpoint(const std::string& dir, const std::string& tag_in, const json& client_state,
                                    bool save_latest) {
  DS_CHECK(micro_steps_ % config_.gradient_accumulation_steps == 0, Error,
           fmt::format("save_checkpoint: call it after engine.step() at a gradient accumulation boundary (this is "
                       "micro-step {} of {}); gradients of an unfinished step are not saved",
                       micro_steps_ % config_.gradient_accumulation_steps, config_.gradient_accumulation_steps));
  const std::string tag = tag_in.empty() ? checkpoint::default_tag(global_steps_) : tag_in;
  checkpoint::check_tag(tag);
  check_tag_agreement(tag);
  // Every phase ends with an agreement: one rank's failure fails the save on all, naming the cause.
  auto phase = [&](const char* what, auto&& fn) {
    std::exception_ptr error;
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
    try {
      agree_or_throw(error, what);
    } catch (...) {
      if (rank() == 0) {
        std::error_code ec;
        fs::remove_all(checkpoint::partial_dir(dir, tag), ec);  // nothing half-written stays behind
      }
      throw;
    }
  };
  const std::string partial = checkpoint::partial_dir(dir, tag);
  const bool bf16 = config_.bf16.enabled;
  std::vector<std::string> rank_files;
  for (int r = 0; r < world_size(); ++r) rank_files.push_back(checkpoint::optim_file_name(r, bf16));

  // This rank's files' checksums (rank 0: its rank file and the model file), for the manifest.
  std::map<std::string, format::FileChecksums> checksums;
  phase("checkpoint_prepare", [&] {
    if (rank() == 0) checkpoint::prepare_partial_dir(dir, tag);
  });
  phase("checkpoint_write", [&] {
    torch::NoGradGuard no_grad;
    const std::string file = (fs::path(partial) / rank_files[size_t(rank())]).string();
    if (optimizer_ && optimizer_->swapped()) {
      // ZeRO-Infinity: stream the swap files sub-group by sub-group (RAM: one sub-group).
      std::vector<const zero::FlatGroup*> layouts;
      for (size_t g = 0; g < states_->num_groups(); ++g) layouts.push_back(&states_->local_layout(g));
      std::vector<checkpoint::SwappedSpan> spans;
      for (const auto& sp : optimizer_->sub_group_spans()) spans.push_back({sp.group, sp.offset, sp.numel});
      checksums[rank_files[size_t(rank())]] = checkpoint::write_swapped_rank_file(
          file, layouts, optimizer_->state_names(), spans,
          [this](size_t k, std::span<float* const> st) { optimizer_->read_sub_group(int64_t(k), st); }, cpu_rng_state(),
          rank(), world_size());
    } else {
      checkpoint::LocalStates local;
      if (optimizer_) local.state_names = optimizer_->state_names();
      for (size_t g = 0; g < states_->num_groups(); ++g) {
        local.layouts.push_back(&states_->local_layout(g));
        local.masters.push_back(optimizer_ ? optimizer_->master(g) : states_->local_params(g).to(torch::kFloat32));
        local.states.push_back(optimizer_ ? &optimizer_->state(g) : nullptr);
      }
      // Stage 0 replicas are identical: rank 0 writes the pieces, every rank its RNG state.
      const bool pieces = states_->partitioned() || rank() == 0;
      checksums[rank_files[size_t(rank())]] =
          checkpoint::write_rank_file(file, local, pieces, cpu_rng_state(), rank(), world_size());
    }
    checkpoint::crash_point("rank_file");
    if (rank() == 0) {
      checksums[checkpoint::model_file_name()] =
          checkpoint::write_tensor_file((fs::path(partial) / checkpoint::model_file_name()).string(),
                                        module_tensors(*module_), {{"format", "deepspeed.cpp model states"}});
      checkpoint::crash_point("model_file");
    }
  });
  phase("checkpoint_commit", [&] {
    json mine = json::object();
    for (const auto& [file, sums] : checksums) mine[file] = format::to_json(sums);
    const auto all = all_gather_text(*comm_, mine.dump(), "checkpoint_checksums");
    if (rank() != 0) return;
    checkpoint::Manifest m;
    m.tag = tag;
    m.zero_stage = states_->stage();
    m.dp_world_size = world_size();
    m.rank_files = rank_files;
    m.model_file = checkpoint::model_file_name();
    m.states = {checkpoint::kMasterState};
    if (optimizer_)
      for (const auto& name : optimizer_->state_names()) m.states.push_back(name);
    for (const auto& [name, t] : module_tensors(*module_)) m.module_tensors.push_back(name);
    m.params = checkpoint::collect_pieces(partial, rank_files, trainable_params(*module_, plan_.model));
    m.engine = engine_state_json();
    m.ds_config = json::parse(config_.json_text, nullptr, false);
    m.client_state = client_state;
    const std::string path = (fs::path(partial) / checkpoint::kManifestFile).string();
    for (size_t r = 0; r < all.size(); ++r) {
      const json theirs = json::parse(all[r]);
      for (const auto& [file, sums] : theirs.items())
        m.checksums[file] = checkpoint::file_checksums_from_json(sums, fmt::format("rank {}'s checksums of {}", r, file));
    }
    (void)checkpoint::manifest_from_json(checkpoint::to_json(m), path);  // what we write must load
    checkpoint::write_manifest(m, path);
    checkpoint::crash_point("manifest");
    checkpoint::commit_tag_dir(dir, tag);
    checkpoint::crash_point("commit");
    if (save_latest) checkpoint::write_latest(dir, tag);
  });
  const std::string out = checkpoint::tag_dir(dir, tag);
  log::info("saved checkpoint {} (global step {}, {} rank file{})", out, global_steps_, world_size(),
            world_size() == 1 ? "" : "s");
  return out;
}

std::optional<LoadResult> Engine::load_checkpoint(const std::string& dir, const std::string& tag_in,
                                                  const LoadOptions& options) {
  std::string tag = tag_in;
  if (tag.empty()) {
    auto latest = checkpoint::read_latest(dir);
    if (!latest) {
      log::warn("load_checkpoint: there is no {}, so nothing was loaded (pass a tag to load a specific checkpoint)",
                (fs::path(dir) / checkpoint::kLatestFile).string());
      return std::nullopt;
    }
    tag = *latest;
  }
  checkpoint::check_tag(tag);
  const std::string path = checkpoint::resolve_tag_dir(dir, tag);
  const checkpoint::Manifest m = checkpoint::read_manifest((fs::path(path) / checkpoint::kManifestFile).string());
  const bool with_states = optimizer_ && options.load_optimizer_states && !options.load_module_only;
  std::vector<std::string> state_names;
  if (with_states) state_names = optimizer_->state_names();

  std::vector<torch::Tensor> masters;
  std::exception_ptr error;
  try {
    const auto params = trainable_params(*module_, plan_.model);
    std::unordered_set<std::string> ours;
    for (const auto& p : params) {
      ours.insert(p.name);
      const checkpoint::ParamEntry* e = m.find(p.name);
      DS_CHECK(e != nullptr, IoError,
               fmt::format("{}: the checkpoint has no parameter {} (a checkpoint of another model?)", path, p.name));
      DS_CHECK(e->shape == p.shape, IoError,
               fmt::format("{}: {} has shape {} in the checkpoint but {} in the model", path, p.name, e->shape, p.shape));
    }
    if (options.load_module_strict)
      for (const auto& e : m.params)
        DS_CHECK(ours.count(e.name), IoError,
                 fmt::format("{}: the checkpoint's parameter {} is not a trainable parameter of the model (pass "
                             "load_module_strict = false to ignore it)",
                             path, e.name));
    for (const auto& s : state_names)
      DS_CHECK(std::find(m.states.begin(), m.states.end(), s) != m.states.end(), IoError,
               fmt::format("{}: the checkpoint holds optimizer states {} but this run's {} needs \"{}\" (load with "
                           "load_optimizer_states = false to start the optimizer afresh)",
                           path, m.states, to_string(optimizer_->type()), s));
    torch::NoGradGuard no_grad;
    checkpoint::SliceReader reader(path, m);
    if (optimizer_ && optimizer_->swapped()) {
      // ZeRO-Infinity: fill the swap files sub-group by sub-group, handing each master span to the
      // 16-bit write-back as it goes (finished below, once every rank has read its slices).
      const auto spans = optimizer_->sub_group_spans();
      for (size_t k = 0; k < spans.size(); ++k) {
        const auto& sp = spans[k];
        std::vector<torch::Tensor> buf{torch::zeros({sp.numel})};
        for (size_t j = 0; j < optimizer_->state_names().size(); ++j) buf.push_back(torch::zeros({sp.numel}));
        std::vector<std::string> names{checkpoint::kMasterState};
        for (const auto& n : optimizer_->state_names()) names.push_back(n);
        for (const auto& slot : states_->local_layout(sp.group).slots) {
          const int64_t lo = std::max(slot.offset, sp.offset), hi = std::min(slot.offset + slot.numel, sp.offset + sp.numel);
          if (lo >= hi) continue;
          const checkpoint::ParamEntry& e = *m.find(slot.name);
          for (size_t j = 0; j < names.size(); ++j) {
            if (j > 0 && !with_states) break;  // weights only: moments stay as initialised
            reader.read(names[j], e, slot.param_offset + (lo - slot.offset), hi - lo,
                        buf[j].data_ptr<float>() + (lo - sp.offset));
          }
        }
        if (!with_states) {  // keep the swapped moments: read them back around the new master
          std::vector<torch::Tensor> cur;
          std::vector<float*> cur_ptrs;
          for (size_t j = 0; j < names.size(); ++j) cur.push_back(torch::empty({sp.numel}));
          for (auto& t : cur) cur_ptrs.push_back(t.data_ptr<float>());
          optimizer_->read_sub_group(int64_t(k), cur_ptrs);
          for (size_t j = 1; j < names.size(); ++j) buf[j] = cur[j];
        }
        std::vector<const float*> ptrs;
        for (const auto& t : buf) ptrs.push_back(t.data_ptr<float>());
        optimizer_->write_sub_group(int64_t(k), ptrs);
        states_->write_back_range(sp.group, sp.offset, buf[0]);
      }
    } else {
      for (size_t g = 0; g < states_->num_groups(); ++g) {
        // The optimizer's own tensors, filled in place (or a copy of the parameters without one).
        torch::Tensor master = optimizer_ ? optimizer_->master(g) : states_->local_params(g).to(torch::kFloat32);
        for (const auto& slot : states_->local_layout(g).slots) {
          if (slot.numel == 0) continue;
          const checkpoint::ParamEntry& e = *m.find(slot.name);
          read_span(reader, checkpoint::kMasterState, e, slot, master);
          for (const auto& s : state_names) read_span(reader, s, e, slot, optimizer_->state(g).at(s));
        }
        masters.push_back(master);
      }
    }
    for (auto& [name, t] : module_tensors(*module_)) {
      if (std::find(m.module_tensors.begin(), m.module_tensors.end(), name) != m.module_tensors.end())
        reader.read_module_tensor(name, t);
      else
        DS_CHECK(!options.load_module_strict, IoError,
                 fmt::format("{}: the checkpoint has no {} (a frozen parameter or buffer of the model)", path, name));
    }
    if (!options.load_module_only) {
      torch::Tensor rng = reader.rng_state(rank() % m.dp_world_size);
      if (rng.defined()) set_cpu_rng_state(rng);
    }
  } catch (...) {
    error = std::current_exception();
  }
  // write_back gathers across ranks: every rank must have read its slices first.
  agree_or_throw(error, "checkpoint_load");
  if (optimizer_ && optimizer_->swapped()) states_->finish_write_back();
  else states_->write_back(masters);
  if (!options.load_module_only) {
    restore_engine_state(m.engine, options);
    warn_if_global_batch_changed(m.engine, config_, path);
  }
  log::info("loaded checkpoint {} (saved at world {}, ZeRO stage {}; now world {}, stage {}; global step {})", path,
            m.dp_world_size, m.zero_stage, world_size(), states_->stage(), global_steps_);
  return LoadResult{path, m.client_state};
}

void Engine::save_16bit_model(const std::string& dir, const std::string& file) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::unordered_set<const void*> seen;
  for (const auto& item : module_->named_parameters()) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    // Stage 3: gather one parameter at a time (every rank takes part), keep rank 0's copy.
    const bool trainable = item.value().requires_grad();
    if (trainable) states_->hold({item.key()});
    if (rank() == 0) {
      torch::Tensor t = item.value().detach();
      if (trainable && t.is_floating_point()) t = t.to(plan_.model);
      tensors.emplace_back(item.key(), t.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true));
    }
    if (trainable) states_->unhold({item.key()});
  }
  for (const auto& item : module_->named_buffers())
    if (rank() == 0 && seen.insert(item.value().unsafeGetTensorImpl()).second)
      tensors.emplace_back(item.key(), item.value().detach().to(torch::kCPU));
  std::exception_ptr error;
  if (rank() == 0) {
    try {
      std::error_code ec;
      fs::create_directories(dir, ec);
      checkpoint::write_tensor_file((fs::path(dir) / file).string(), tensors, {{"format", "pt"}});
    } catch (...) {
      error = std::current_exception();
    }
  }
  agree_or_throw(error, "save_16bit_model");
}

}  // namespace ds
