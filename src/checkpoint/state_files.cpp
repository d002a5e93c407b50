#include "checkpoint/state_files.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "format/torch_dtypes.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::checkpoint {

using namespace format;  // the file formats (src/format) this layer is built on
namespace fs = std::filesystem;

StDtype st_dtype_of(torch::ScalarType t) {
  if (auto d = to_st_dtype(t)) return *d;
  throw NotSupported(fmt::format("checkpoint: tensors of dtype {} cannot be saved in safetensors", c10::toString(t)));
}

torch::ScalarType scalar_type_of(StDtype d) {
  if (auto t = to_scalar_type(d)) return *t;
  throw NotSupported(fmt::format("safetensors dtype {} has no LibTorch 1.13 equivalent", dtype_name(d)));
}

namespace {

// CPU and contiguous: device tensors are copied to the host, strided ones compacted (kept alive in
// `keep` until the writer commits).
const void* host_data(const torch::Tensor& t, std::vector<torch::Tensor>& keep) {
  torch::Tensor h = t.device().is_cpu() ? t.contiguous() : t.to(torch::kCPU).contiguous();
  keep.push_back(h);
  return h.data_ptr();
}

}  // namespace

FileChecksums write_rank_file(const std::string& path, const LocalStates& local, bool with_pieces,
                              const torch::Tensor& rng_state, int rank, int world,
                              const std::vector<std::pair<std::string, torch::Tensor>>& private_tensors) {
  SafetensorsWriter w(path);
  w.set_metadata("format", "deepspeed.cpp rank states");
  w.set_metadata("rank", std::to_string(rank));
  w.set_metadata("world_size", std::to_string(world));
  std::vector<torch::Tensor> keep;
  for (size_t g = 0; with_pieces && g < local.layouts.size(); ++g) {
    for (const auto& slot : local.layouts[g]->slots) {
      if (slot.numel == 0) continue;  // a stage-3 shard of padding only
      auto add = [&](const std::string& state, const torch::Tensor& span) {
        DS_ASSERT(span.scalar_type() == torch::kFloat32, "optimizer spans are fp32");
        w.add(piece_tensor_name(state, slot.name, slot.param_offset), StDtype::F32, {slot.numel},
              host_data(span.narrow(0, slot.offset, slot.numel), keep));
      };
      add(kMasterState, local.masters[g]);
      for (const auto& s : local.state_names) add(s, local.states[g]->at(s));
    }
  }
  if (rng_state.defined()) w.add("rng_state/cpu", StDtype::U8, {rng_state.numel()}, host_data(rng_state, keep));
  for (const auto& [name, t] : private_tensors)
    w.add("private/" + name, st_dtype_of(t.scalar_type()), {t.numel()}, host_data(t, keep));
  w.commit();
  return w.checksums();
}

FileChecksums write_swapped_rank_file(const std::string& path, const std::vector<const zero::FlatGroup*>& layouts,
                                      const std::vector<std::string>& state_names, const std::vector<SwappedSpan>& spans,
                                      const SubGroupReader& read, const torch::Tensor& rng_state, int rank, int world) {
  SafetensorsWriter w(path);
  w.set_metadata("format", "deepspeed.cpp rank states");
  w.set_metadata("rank", std::to_string(rank));
  w.set_metadata("world_size", std::to_string(world));
  const size_t states = 1 + state_names.size();
  // The writer calls producers in insertion order, all of sub-group k before k+1: one cached
  // sub-group serves all its pieces.
  struct Cache {
    int64_t k = -1;
    std::vector<std::vector<float>> data;
  };
  auto cache = std::make_shared<Cache>();
  for (size_t k = 0; k < spans.size(); ++k) {
    const SwappedSpan& sp = spans[k];
    for (const auto& slot : layouts[sp.group]->slots) {
      const int64_t lo = std::max(slot.offset, sp.offset), hi = std::min(slot.offset + slot.numel, sp.offset + sp.numel);
      if (lo >= hi) continue;
      for (size_t j = 0; j < states; ++j) {
        const std::string& state = j == 0 ? std::string(kMasterState) : state_names[j - 1];
        w.add_streamed(piece_tensor_name(state, slot.name, slot.param_offset + (lo - slot.offset)), StDtype::F32,
                       {hi - lo}, [=, &read](const SafetensorsWriter::ChunkSink& sink) {
                         if (cache->k != int64_t(k)) {
                           cache->data.assign(states, std::vector<float>(size_t(sp.numel)));
                           std::vector<float*> ptrs;
                           for (auto& d : cache->data) ptrs.push_back(d.data());
                           read(k, ptrs);
                           cache->k = int64_t(k);
                         }
                         sink(cache->data[j].data() + (lo - sp.offset), size_t(hi - lo) * sizeof(float));
                       });
      }
    }
  }
  std::vector<torch::Tensor> keep;
  if (rng_state.defined()) w.add("rng_state/cpu", StDtype::U8, {rng_state.numel()}, host_data(rng_state, keep));
  w.commit();
  return w.checksums();
}

FileChecksums write_tensor_file(const std::string& path,
                                const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                                const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter w(path);
  for (const auto& [k, v] : metadata) w.set_metadata(k, v);
  std::vector<torch::Tensor> keep;
  for (const auto& [name, t] : tensors) w.add(name, st_dtype_of(t.scalar_type()), t.sizes().vec(), host_data(t, keep));
  w.commit();
  return w.checksums();
}

std::vector<ParamEntry> collect_pieces(const std::string& dir, const std::vector<std::string>& rank_files,
                                       const std::vector<ParamInfo>& params) {
  std::map<std::string, std::vector<PieceRef>> pieces;
  for (size_t r = 0; r < rank_files.size(); ++r) {
    SafetensorsFile f((fs::path(dir) / rank_files[r]).string());
    for (const auto& t : f.tensors()) {
      std::string state, param;
      int64_t offset = 0;
      if (parse_piece_tensor_name(t.name, &state, &param, &offset) && state == kMasterState)
        pieces[param].push_back({int(r), offset, t.numel()});
    }
  }
  std::vector<ParamEntry> out;
  for (const auto& p : params) {
    ParamEntry e{p.name, p.shape, p.dtype, pieces[p.name]};
    std::sort(e.pieces.begin(), e.pieces.end(), [](const PieceRef& a, const PieceRef& b) { return a.offset < b.offset; });
    out.push_back(std::move(e));
  }
  return out;
}

SliceReader::SliceReader(std::string dir, const Manifest& manifest, bool verify)
    : dir_(std::move(dir)), manifest_(manifest), verify_(verify), files_(manifest.rank_files.size()) {
  if (verify_ && manifest_.checksums.empty()) {
    log::warn("checkpoint {}: its manifest has no checksums (saved by an older deepspeed.cpp), so its files are read "
              "without verification; save it again to add them",
              dir_);
    verify_ = false;
  }
}

const FileChecksums* SliceReader::checksums_of(const std::string& file) const {
  if (!verify_) return nullptr;
  const auto it = manifest_.checksums.find(file);
  DS_CHECK(it != manifest_.checksums.end(), IoError,
           fmt::format("{}: the manifest has no checksums for {}", dir_, file));  // manifest_from_json checks this
  return &it->second;
}

const SafetensorsFile& SliceReader::file(int rank) {
  auto& f = files_.at(size_t(rank));
  if (!f) {
    const std::string path = (fs::path(dir_) / manifest_.rank_files[size_t(rank)]).string();
    DS_CHECK(fs::exists(path), IoError,
             path + ": missing rank file (the checkpoint was saved with " + std::to_string(manifest_.dp_world_size) +
                 " ranks; copy every zero_pp_rank_* file of the tag)");
    f = std::make_unique<SafetensorsFile>(path, checksums_of(manifest_.rank_files[size_t(rank)]));
  }
  return *f;
}

void SliceReader::read(const std::string& state, const ParamEntry& param, int64_t offset, int64_t n, float* dst) {
  const int64_t end = offset + n;
  for (const auto& q : param.pieces) {
    const int64_t lo = std::max(offset, q.offset), hi = std::min(end, q.offset + q.length);
    if (lo >= hi) continue;
    const SafetensorsFile& f = file(q.rank);
    const std::string name = piece_tensor_name(state, param.name, q.offset);
    const TensorInfo& info = f.at(name);
    DS_CHECK(info.dtype == StDtype::F32 && info.numel() == q.length, IoError,
             fmt::format("{}: tensor {} is {} x {} but the manifest says {} x F32 (the files of this tag do not match)",
                         f.path(), name, info.numel(), dtype_name(info.dtype), q.length));
    f.read_range(info, uint64_t(lo - q.offset) * sizeof(float), dst + (lo - offset), size_t(hi - lo) * sizeof(float));
  }
}

torch::Tensor SliceReader::rng_state(int rank) {
  const SafetensorsFile& f = file(rank);
  const TensorInfo* info = f.find("rng_state/cpu");
  if (!info || info->dtype != StDtype::U8) return {};
  torch::Tensor t = torch::empty({info->numel()}, torch::kUInt8);
  f.read(*info, t.data_ptr(), info->nbytes());
  return t;
}

torch::Tensor SliceReader::rank_private(int rank, const std::string& name) {
  const SafetensorsFile& f = file(rank);
  const TensorInfo* info = f.find("private/" + name);
  if (!info) return {};
  torch::Tensor t = torch::empty({info->numel()}, scalar_type_of(info->dtype));
  f.read(*info, t.data_ptr(), info->nbytes());
  return t;
}

void SliceReader::read_module_tensor(const std::string& name, torch::Tensor& dst) {
  const std::string* file = manifest_.module_file_of(name);
  DS_CHECK(file != nullptr, IoError, fmt::format("{}: the checkpoint has no {} in any model file", dir_, name));
  auto& f = model_files_[*file];
  if (!f) f = std::make_unique<SafetensorsFile>((fs::path(dir_) / *file).string(), checksums_of(*file));
  const TensorInfo& info = f->at(name);
  DS_CHECK(info.shape == dst.sizes().vec(), IoError,
           fmt::format("{}: {} has shape {} but the model's is {} (a checkpoint of another model?)", f->path(), name,
                       info.shape, dst.sizes().vec()));
  torch::Tensor h = torch::empty(info.shape, scalar_type_of(info.dtype));
  f->read(info, h.data_ptr(), info.nbytes());
  torch::NoGradGuard no_grad;
  dst.copy_(h);
}

}  // namespace ds::checkpoint
