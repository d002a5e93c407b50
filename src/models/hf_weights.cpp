#include "models/hf_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "format/torch_dtypes.h"
#include "util/error.h"

namespace ds::models {
namespace fs = std::filesystem;
using format::SafetensorsFile;
using format::StDtype;

namespace {

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

nlohmann::json read_index(const fs::path& p) {
  std::ifstream in(p);
  DS_CHECK(in.good(), IoError, p.string() + ": cannot open the safetensors index");
  auto j = nlohmann::json::parse(in, nullptr, false);
  DS_CHECK(!j.is_discarded() && j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), IoError,
           p.string() + ": not a safetensors index (expected {\"weight_map\": {tensor: file}})");
  return j;
}

}  // namespace

void write_text_atomically(const std::string& file, const std::string& text) {
  const fs::path path(file);
  const fs::path tmp = file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    DS_CHECK(out.good(), IoError, tmp.string() + ": cannot write (disk full or read-only?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  DS_CHECK(!ec, IoError, path.string() + ": cannot rename the new file into place: " + ec.message());
}

torch::ScalarType torch_dtype_of(StDtype d, const std::string& what) {
  if (auto t = format::to_scalar_type(d)) return *t;
  throw IoError(fmt::format("{} is stored as {}, which LibTorch 1.13 cannot hold", what, format::dtype_name(d)));
}

StDtype st_dtype_of(torch::ScalarType t) {
  if (auto d = format::to_st_dtype(t)) return *d;
  throw NotSupported(std::string("no safetensors dtype for ") + c10::toString(t));
}

HfWeights::HfWeights(const std::string& path) : source_(path) {
  fs::path p(path);
  if (fs::is_directory(p)) {
    if (fs::exists(p / kIndex)) p /= kIndex;
    else if (fs::exists(p / kSingle)) p /= kSingle;
    else throw IoError(path + ": holds neither " + kSingle + " nor " + kIndex + " (is it a Hugging Face model folder?)");
  }
  DS_CHECK(fs::exists(p), IoError, p.string() + ": no such file");
  source_ = p.string();
  if (!p.string().ends_with(".index.json")) {
    files_.push_back(std::make_unique<SafetensorsFile>(p.string()));
    for (const auto& t : files_.back()->tensors()) where_[t.name] = {files_.back().get(), &t};
    return;
  }
  const auto index = read_index(p);
  std::map<std::string, const SafetensorsFile*> opened;
  for (const auto& [name, file] : index["weight_map"].items()) {
    DS_CHECK(file.is_string(), IoError, p.string() + ": weight_map[\"" + name + "\"] is not a file name");
    const std::string f = (p.parent_path() / file.get<std::string>()).string();
    if (!opened.count(f)) {
      DS_CHECK(fs::exists(f), IoError,
               p.string() + " names shard " + file.get<std::string>() + " (for " + name + "), which does not exist");
      files_.push_back(std::make_unique<SafetensorsFile>(f));
      opened[f] = files_.back().get();
    }
    const auto* shard = opened[f];
    const auto* info = shard->find(name);
    DS_CHECK(info != nullptr, IoError,
             p.string() + " places " + name + " in " + file.get<std::string>() + ", but that file has no such tensor");
    where_[name] = {shard, info};
  }
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, loc] : where_) out.push_back(name);
  return out;
}

const format::TensorInfo& HfWeights::info(const std::string& name) const {
  auto it = where_.find(name);
  DS_CHECK(it != where_.end(), IoError, source_ + ": no tensor " + name);
  return *it->second.second;
}

const std::string& HfWeights::file_of(const std::string& name) const {
  auto it = where_.find(name);
  DS_CHECK(it != where_.end(), IoError, source_ + ": no tensor " + name);
  return it->second.first->path();
}

torch::Tensor HfWeights::read(const std::string& name, torch::ScalarType dtype) const {
  auto it = where_.find(name);
  DS_CHECK(it != where_.end(), IoError, source_ + ": no tensor " + name);
  const auto& [file, info] = it->second;
  torch::Tensor t = torch::empty(info->shape, torch_dtype_of(info->dtype, file->path() + ": " + name));
  file->read(*info, t.data_ptr(), info->nbytes());
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

void write_hf_weights(const std::string& dir, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      int64_t max_shard_bytes) {
  fs::create_directories(dir);
  const fs::path root(dir);
  std::vector<torch::Tensor> host;  // contiguous CPU copies, alive until every commit
  host.reserve(tensors.size());
  int64_t total = 0;
  for (const auto& [name, t] : tensors) {
    host.push_back(t.detach().to(torch::kCPU).contiguous());
    total += static_cast<int64_t>(host.back().nbytes());
  }
  // Cut into shards: a new one when the next tensor would pass the limit (a tensor larger than
  // the limit gets a shard of its own, as transformers does).
  std::vector<std::pair<size_t, size_t>> shards;  // [begin, end) into tensors
  if (max_shard_bytes <= 0 || total <= max_shard_bytes) {
    shards.emplace_back(0, tensors.size());
  } else {
    size_t begin = 0;
    int64_t bytes = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto n = static_cast<int64_t>(host[i].nbytes());
      if (i > begin && bytes + n > max_shard_bytes) {
        shards.emplace_back(begin, i);
        begin = i;
        bytes = 0;
      }
      bytes += n;
    }
    shards.emplace_back(begin, tensors.size());
  }
  auto write_file = [&](const fs::path& path, size_t begin, size_t end) {
    format::SafetensorsWriter w(path.string());
    w.set_metadata("format", "pt");
    for (size_t i = begin; i < end; ++i) {
      const auto& t = host[i];
      w.add(tensors[i].first, st_dtype_of(t.scalar_type()), t.sizes().vec(), t.data_ptr());
    }
    w.commit();
  };
  // Weight files of an earlier save that the new layout does not overwrite.
  std::vector<fs::path> stale;
  if (fs::exists(root / kIndex)) {
    auto old = nlohmann::json::parse(std::ifstream(root / kIndex), nullptr, false);
    if (!old.is_discarded() && old.is_object() && old.contains("weight_map") && old["weight_map"].is_object())
      for (const auto& [name, file] : old["weight_map"].items())
        if (file.is_string()) stale.push_back(root / file.get<std::string>());
  }
  if (shards.size() == 1) {
    write_file(root / kSingle, 0, tensors.size());
    stale.push_back(root / kIndex);
  } else {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", nlohmann::json::object()}};
    std::vector<fs::path> written;
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
      write_file(root / file, shards[s].first, shards[s].second);
      written.push_back(root / file);
      for (size_t i = shards[s].first; i < shards[s].second; ++i) index["weight_map"][tensors[i].first] = file;
    }
    write_text_atomically((root / kIndex).string(), index.dump(2) + "\n");
    stale.push_back(root / kSingle);
    std::erase_if(stale, [&](const fs::path& f) { return std::find(written.begin(), written.end(), f) != written.end(); });
  }
  for (const auto& f : stale) {
    std::error_code ec;
    fs::remove(f, ec);  // best effort: a leftover file is never read (the index or single file wins)
  }
}

}  // namespace ds::models
