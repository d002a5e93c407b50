#include "checkpoint/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

#include "format/posix_file.h"
#include "util/error.h"

namespace ds::checkpoint {

using namespace format;  // the file formats (src/format) this layer is built on
using nlohmann::json;

int64_t ParamEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const ParamEntry* Manifest::find(const std::string& name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

const std::string* Manifest::module_file_of(const std::string& name) const {
  if (std::find(module_tensors.begin(), module_tensors.end(), name) != module_tensors.end()) return &model_file;
  for (const auto& f : stage_model_files)
    if (std::find(f.tensors.begin(), f.tensors.end(), name) != f.tensors.end()) return &f.file;
  return nullptr;
}

std::vector<std::string> Manifest::model_files() const {
  std::vector<std::string> out{model_file};
  for (const auto& f : stage_model_files) out.push_back(f.file);
  return out;
}

std::string piece_tensor_name(const std::string& state, const std::string& param, int64_t offset) {
  return state + "/" + param + "@" + std::to_string(offset);
}

bool parse_piece_tensor_name(const std::string& tensor, std::string* state, std::string* param, int64_t* offset) {
  const size_t slash = tensor.find('/'), at = tensor.rfind('@');
  if (slash == std::string::npos || at == std::string::npos || at < slash + 2 || at + 1 >= tensor.size()) return false;
  const std::string digits = tensor.substr(at + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 18)
    return false;
  *state = tensor.substr(0, slash);
  *param = tensor.substr(slash + 1, at - slash - 1);
  *offset = std::stoll(digits);
  return true;
}

json to_json(const Manifest& m) {
  json params = json::array();
  for (const auto& p : m.params) {
    json pieces = json::array();
    for (const auto& q : p.pieces) pieces.push_back({{"rank", q.rank}, {"offset", q.offset}, {"length", q.length}});
    params.push_back({{"name", p.name}, {"shape", p.shape}, {"dtype", p.dtype}, {"pieces", pieces}});
  }
  json out = {{"format", "deepspeed.cpp checkpoint"}, {"version", m.version}, {"tag", m.tag},
              {"zero_stage", m.zero_stage}, {"dp_world_size", m.dp_world_size}, {"rank_files", m.rank_files},
              {"model_file", m.model_file}, {"states", m.states}, {"module_tensors", m.module_tensors},
              {"engine", m.engine}, {"ds_config", m.ds_config}, {"client_state", m.client_state},
              {"parameters", params}};
  if (!m.stage_model_files.empty()) {
    json stages = json::array();
    for (const auto& f : m.stage_model_files) stages.push_back({{"file", f.file}, {"tensors", f.tensors}});
    out["stage_model_files"] = stages;
  }
  if (!m.checksums.empty()) {
    json files = json::object();
    for (const auto& [file, sums] : m.checksums) files[file] = to_json(sums);
    out["checksums"] = {{"algorithm", kChecksumAlgorithm}, {"files", files}};
  }
  return out;
}

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw IoError(source + ": not a valid deepspeed.cpp checkpoint manifest: " + what);
}

// An integer of T's range; anything else (a float, which nlohmann would convert with undefined
// behaviour when out of range, or a number T cannot hold) is a manifest we did not write.
template <class T>
T integer(const json& v, const char* key, const std::string& source) {
  if (!v.is_number_integer()) bad(source, std::string("\"") + key + "\" is not an integer");
  constexpr auto lo = std::numeric_limits<T>::min();
  constexpr auto hi = static_cast<uint64_t>(std::numeric_limits<T>::max());
  const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= hi
                                           : v.get<int64_t>() >= lo && (v.get<int64_t>() < 0 || uint64_t(v.get<int64_t>()) <= hi);
  if (!fits) bad(source, std::string("\"") + key + "\" is out of range");
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
}

template <class T>
T get(const json& j, const char* key, const std::string& source) {
  if (!j.is_object() || !j.contains(key)) bad(source, std::string("missing \"") + key + "\"");
  const json& v = j.at(key);
  if constexpr (std::is_integral_v<T>) {
    return integer<T>(v, key, source);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (!v.is_array()) bad(source, std::string("\"") + key + "\" has the wrong type");
    T out;
    for (const auto& e : v) out.push_back(integer<int64_t>(e, key, source));
    return out;
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception&) {
      bad(source, std::string("\"") + key + "\" has the wrong type");
    }
  }
}

void check_tiling(const ParamEntry& p, size_t ranks, const std::string& source) {
  int64_t next = 0;
  for (const auto& q : p.pieces) {
    if (q.rank < 0 || size_t(q.rank) >= ranks) bad(source, p.name + ": piece names rank " + std::to_string(q.rank));
    if (q.offset != next || q.length <= 0)
      bad(source, p.name + ": its pieces do not tile the parameter (gap or overlap at element " +
                      std::to_string(std::min(q.offset, next)) + ")");
    next += q.length;
  }
  if (next != p.numel())
    bad(source, p.name + ": pieces cover " + std::to_string(next) + " of " + std::to_string(p.numel()) + " elements");
}

// "checksums": {"algorithm": "crc32c", "files": {"<file>": {...}}}: one entry for each rank file and
// model file, no other.
void read_checksums(const json& c, Manifest& m, const std::string& source) {
  if (!c.is_object()) bad(source, "\"checksums\" is not an object");
  const auto algorithm = get<std::string>(c, "algorithm", source);
  if (algorithm != kChecksumAlgorithm)
    bad(source, "checksum algorithm \"" + algorithm + "\" (this build knows " + kChecksumAlgorithm + ")");
  const json files = get<json>(c, "files", source);
  if (!files.is_object()) bad(source, "\"checksums.files\" is not an object");
  std::vector<std::string> want = m.rank_files;
  for (const auto& f : m.model_files()) want.push_back(f);
  for (const auto& f : want)
    if (!files.contains(f)) bad(source, "no checksums for " + f);
  if (files.size() != std::set<std::string>(want.begin(), want.end()).size())
    bad(source, "checksums of a file that is not part of the checkpoint");
  for (const auto& [file, entry] : files.items())
    m.checksums.emplace(
        file, file_checksums_from_json(entry, source + ": not a valid deepspeed.cpp checkpoint manifest: checksums of " + file));
}

}  // namespace

Manifest manifest_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) bad(source, "not a JSON object");
  Manifest m;
  m.version = get<int>(j, "version", source);
  if (m.version != kManifestVersion)
    bad(source, "version " + std::to_string(m.version) + " (this build reads version " +
                    std::to_string(kManifestVersion) + ")");
  m.tag = get<std::string>(j, "tag", source);
  m.zero_stage = get<int>(j, "zero_stage", source);
  m.dp_world_size = get<int>(j, "dp_world_size", source);
  m.rank_files = get<std::vector<std::string>>(j, "rank_files", source);
  m.model_file = get<std::string>(j, "model_file", source);
  m.states = get<std::vector<std::string>>(j, "states", source);
  m.module_tensors = get<std::vector<std::string>>(j, "module_tensors", source);
  if (j.contains("stage_model_files")) {
    const json stages = get<json>(j, "stage_model_files", source);
    if (!stages.is_array()) bad(source, "\"stage_model_files\" is not an array");
    for (const auto& e : stages)
      m.stage_model_files.push_back({get<std::string>(e, "file", source), get<std::vector<std::string>>(e, "tensors", source)});
  }
  m.engine = get<json>(j, "engine", source);
  m.ds_config = get<json>(j, "ds_config", source);
  m.client_state = get<json>(j, "client_state", source);
  if (m.dp_world_size < 1 || m.rank_files.size() != size_t(m.dp_world_size))
    bad(source, "dp_world_size " + std::to_string(m.dp_world_size) + " but " + std::to_string(m.rank_files.size()) +
                    " rank files");
  if (m.states.empty() || m.states.front() != kMasterState) bad(source, "\"states\" must start with \"fp32\"");
  const json params = get<json>(j, "parameters", source);
  if (!params.is_array()) bad(source, "\"parameters\" is not an array");
  for (const auto& e : params) {
    ParamEntry p;
    p.name = get<std::string>(e, "name", source);
    p.shape = get<std::vector<int64_t>>(e, "shape", source);
    p.dtype = get<std::string>(e, "dtype", source);
    for (int64_t d : p.shape)
      if (d < 0 || d > (int64_t(1) << 40)) bad(source, p.name + ": bad shape");
    const json pieces = get<json>(e, "pieces", source);
    if (!pieces.is_array()) bad(source, p.name + ": \"pieces\" is not an array");
    for (const auto& q : pieces)
      p.pieces.push_back({get<int>(q, "rank", source), get<int64_t>(q, "offset", source), get<int64_t>(q, "length", source)});
    std::sort(p.pieces.begin(), p.pieces.end(), [](const PieceRef& a, const PieceRef& b) { return a.offset < b.offset; });
    check_tiling(p, m.rank_files.size(), source);
    m.params.push_back(std::move(p));
  }
  if (j.contains("checksums")) read_checksums(j.at("checksums"), m, source);
  return m;
}

void write_manifest(const Manifest& m, const std::string& path) {
  const std::string text = to_json(m).dump(1) + "\n";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    UniqueFd fd = open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC);
    write_all(fd.get(), text.data(), text.size(), tmp);
    fsync_fd(fd.get(), tmp);
    fd.close(tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(tmp, "rename to " + path, errno);
  fsync_directory(parent_directory(path));
}

Manifest read_manifest(const std::string& path) {
  std::ifstream in(path);
  DS_CHECK(in.good(), IoError, path + ": cannot open the checkpoint manifest (missing: the checkpoint is incomplete or not ours)");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad(path, "not valid JSON (truncated or corrupted)");
  return manifest_from_json(j, path);
}

}  // namespace ds::checkpoint
