// ds-zero-to-fp32: a deepspeed.cpp checkpoint (any ZeRO stage, any world size) → one safetensors
// file, or shards plus model.safetensors.index.json, in Hugging Face's layout. Streams one tensor at
// a time — read from whichever rank files hold its pieces, converted, written — so memory is
// bounded by the largest tensor, not the model (DeepSpeed's zero_to_fp32 holds the whole model).
// Checkpoints written by ds-train record the model (export_layout.h): a config.json is written
// beside the weights, and GPT-2's Conv1D weights are transposed to HF's [in, out], so
// from_pretrained and HF tools load the export. Names are the model's, which are HF's (a tied head
// has no lm_head.weight, as HF saves it).
// Every byte read is verified against the manifest's checksums (--no-verify skips it). The files are
// written into a staging folder inside the output folder and moved into place only when all are
// complete, so a failure leaves the output folder as it was; then stale model files that would
// shadow or mix with the new export (a single model.safetensors beside new shards, or shards and
// their index beside a new single file) are removed, and the tool says which.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "checkpoint/layout.h"
#include "checkpoint/manifest.h"
#include "format/posix_file.h"
#include "checkpoint/state_files.h"
#include "export_layout.h"
#include "models/gpt2_hf.h"
#include "util/error.h"
#include "util/system_info.h"
#include "util/blas_core_select.h"

namespace {
namespace fs = std::filesystem;
using namespace ds;

struct Options {
  std::string checkpoint_dir, output_dir, tag, dtype = "fp32", max_shard_size = "5GB";
  bool no_verify = false;
};

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

bool is_shard_name(const std::string& name) {
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return std::regex_match(name, shard);
}

// Model files in `dir` that Hugging Face would load instead of, or together with, the export's
// `written` files: model.safetensors when the export is sharded; an index and shards that are not
// the export's when it is a single file (or shards of another count).
std::vector<std::string> stale_model_files(const std::string& dir, const std::vector<std::string>& written,
                                           bool sharded) {
  std::vector<std::string> stale;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (std::find(written.begin(), written.end(), name) != written.end()) continue;
    if ((sharded && name == kSingleFile) || (!sharded && name == kIndexFile) || is_shard_name(name))
      stale.push_back(name);
  }
  std::sort(stale.begin(), stale.end());
  return stale;
}

// A text file, atomically (temp, fsync, rename) like every file the checkpoint layer writes.
void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    format::UniqueFd fd = format::open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    format::write_all(fd.get(), text.data(), text.size(), tmp);
    format::fsync_fd(fd.get(), tmp);
    fd.close(tmp);
  }
  fs::rename(tmp, path);
}

// The staging folder: removed with whatever it holds unless released (on success it is empty).
struct Staging {
  std::string path;
  ~Staging() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

uint64_t parse_size(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw Error("--max-shard-size " + s + ": expected a size like 5GB, 500MB or 1073741824");
  }
  std::string unit = s.substr(pos);
  static const std::map<std::string, double> units = {{"", 1},      {"B", 1},        {"KB", 1e3},  {"MB", 1e6},
                                                      {"GB", 1e9},  {"KiB", 1024.0}, {"MiB", 1048576.0},
                                                      {"GiB", 1073741824.0}};
  auto it = units.find(unit);
  // At least one byte, and a count uint64 holds (1e400, nan and 0.1 are not sizes).
  const bool in_range = it != units.end() && v * it->second >= 1 && v * it->second < 1.8e19;
  DS_CHECK(in_range, Error, "--max-shard-size " + s + ": expected a size from 1 byte up, like 5GB, 500MB or 1073741824");
  return static_cast<uint64_t>(v * it->second);
}

// One tensor of the export: where it comes from and what it becomes.
struct Item {
  std::string name;
  std::vector<int64_t> shape;              // as exported (transposed for Conv1D)
  const checkpoint::ParamEntry* param = nullptr;  // trainable: fp32 pieces
  const format::SafetensorsFile* file = nullptr;  // else: the model file holding it
  bool transpose = false;
  uint64_t bytes = 0;
};

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"ds-zero-to-fp32: export a deepspeed.cpp checkpoint as Hugging Face safetensors"};
  app.add_option("checkpoint_dir", o.checkpoint_dir, "the directory given to save_checkpoint (holds 'latest')")->required();
  app.add_option("output_dir", o.output_dir, "where model.safetensors (or shards + index) and config.json go")->required();
  app.add_option("--tag", o.tag, "the checkpoint tag (default: the one in <checkpoint_dir>/latest)");
  app.add_option("--dtype", o.dtype, "fp32 | bf16 | fp16")->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--max-shard-size,--max_shard_size", o.max_shard_size, "largest file (5GB, 500MB, ...); bigger exports are sharded")
      ->capture_default_str();
  app.add_flag("--no-verify,--no_verify", o.no_verify,
               "skip the CRC-32C check of every byte read against the checkpoint's manifest (faster; exports a "
               "corrupted checkpoint as it is)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const uint64_t max_shard = parse_size(o.max_shard_size);
  const torch::ScalarType out_dtype = o.dtype == "bf16" ? torch::kBFloat16 : o.dtype == "fp16" ? torch::kFloat16 : torch::kFloat32;
  if (o.tag.empty()) {
    auto latest = checkpoint::read_latest(o.checkpoint_dir);
    DS_CHECK(latest.has_value(), IoError, o.checkpoint_dir + ": no 'latest' file (pass --tag)");
    o.tag = *latest;
  }
  const std::string dir = checkpoint::resolve_tag_dir(o.checkpoint_dir, o.tag);
  const checkpoint::Manifest m = checkpoint::read_manifest((fs::path(dir) / checkpoint::kManifestFile).string());
  checkpoint::SliceReader reader(dir, m, !o.no_verify);
  const std::string torch_dtype = o.dtype == "bf16" ? "bfloat16" : o.dtype == "fp16" ? "float16" : "float32";
  const tools::ExportLayout layout = tools::export_layout(m.client_state.value("model", nlohmann::json()), torch_dtype);

  const uint64_t elem = torch::elementSize(out_dtype);
  std::vector<Item> items;
  for (const auto& p : m.params) {
    Item it{p.name, p.shape, &p, nullptr, layout.transpose_conv1d && models::is_conv1d_weight(p.name) && p.shape.size() == 2, 0};
    if (it.transpose) std::swap(it.shape[0], it.shape[1]);
    it.bytes = uint64_t(p.numel()) * elem;
    items.push_back(std::move(it));
  }
  std::vector<std::unique_ptr<format::SafetensorsFile>> model_files;  // rank 0's, then pipeline stages'
  for (const auto& name : m.model_files()) {
    model_files.push_back(
        std::make_unique<format::SafetensorsFile>((fs::path(dir) / name).string(), reader.checksums_of(name)));
    for (const auto& t : model_files.back()->tensors()) {
      const bool is_float = t.dtype == format::StDtype::F32 || t.dtype == format::StDtype::BF16 ||
                            t.dtype == format::StDtype::F16 || t.dtype == format::StDtype::F64;
      items.push_back({t.name, t.shape, nullptr, model_files.back().get(), false,
                       is_float ? uint64_t(t.numel()) * elem : t.nbytes()});
    }
  }

  // Shards in model order, a new one when the next tensor would pass the limit (as HF does).
  std::vector<std::vector<const Item*>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const auto& it : items) {
    if (!shards.back().empty() && in_shard + it.bytes > max_shard) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&it);
    in_shard += it.bytes;
    total += it.bytes;
  }
  std::error_code ec;
  const bool created = !fs::exists(o.output_dir);
  fs::create_directories(o.output_dir, ec);
  DS_CHECK(!ec, IoError, o.output_dir + ": cannot create: " + ec.message());
  Staging staging{(fs::path(o.output_dir) / (".ds-zero-to-fp32.partial." + std::to_string(::getpid()))).string()};
  fs::create_directory(staging.path, ec);
  DS_CHECK(!ec, IoError, staging.path + ": cannot create: " + ec.message() + " (is " + o.output_dir + " writable?)");
  std::vector<std::string> written;  // file names, in the order they are moved into place
  try {
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string file =
          shards.size() == 1 ? kSingleFile : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
      format::SafetensorsWriter w((fs::path(staging.path) / file).string());
      w.set_metadata("format", "pt");
      for (const Item* it : shards[s]) {
        weight_map[it->name] = file;
        const format::TensorInfo* info = it->param ? nullptr : &it->file->at(it->name);
        torch::ScalarType dtype = out_dtype;  // integer buffers keep their dtype
        if (info && !torch::isFloatingType(checkpoint::scalar_type_of(info->dtype))) dtype = checkpoint::scalar_type_of(info->dtype);
        w.add_streamed(it->name, checkpoint::st_dtype_of(dtype), it->shape, [&, it, info, dtype](const auto& sink) {
          torch::Tensor t;
          if (it->param) {  // the fp32 master, gathered from its pieces in whichever rank files
            t = torch::empty(it->param->shape, torch::kFloat32);
            reader.read(checkpoint::kMasterState, *it->param, 0, it->param->numel(), t.data_ptr<float>());
          } else {
            t = torch::empty(info->shape, checkpoint::scalar_type_of(info->dtype));
            it->file->read(*info, t.data_ptr(), info->nbytes());
          }
          if (it->transpose) t = t.t();
          t = t.to(dtype).contiguous();
          sink(t.data_ptr(), t.nbytes());
        });
      }
      w.commit();
      written.push_back(file);
    }
    if (shards.size() > 1) {
      nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
      write_text_file((fs::path(staging.path) / kIndexFile).string(), index.dump(2) + "\n");
      written.push_back(kIndexFile);
    }
    if (layout.config) {
      write_text_file((fs::path(staging.path) / "config.json").string(), layout.config->dump(2) + "\n");
      written.push_back("config.json");
    }
  } catch (...) {
    // Nothing of this export is left behind (the staging folder goes with `staging`).
    if (created) {
      std::error_code ignored;
      fs::remove_all(staging.path, ignored);
      fs::remove(o.output_dir, ignored);  // only when empty: it was created for this export
    }
    throw;
  }
  // Every file is complete: move them into place, then remove what would shadow or mix with them.
  for (const auto& file : written) fs::rename(fs::path(staging.path) / file, fs::path(o.output_dir) / file);
  format::fsync_directory(o.output_dir);
  const bool sharded = shards.size() > 1;
  const std::vector<std::string> stale = stale_model_files(o.output_dir, written, sharded);
  for (const auto& file : stale) {
    fs::remove(fs::path(o.output_dir) / file, ec);
    DS_CHECK(!ec, IoError,
             (fs::path(o.output_dir) / file).string() + ": cannot remove this stale model file (" + ec.message() +
                 "); remove it by hand: Hugging Face would load it " +
                 (sharded && file == kSingleFile ? "instead of the new shards" : "together with the new export"));
    std::printf("ds-zero-to-fp32: removed stale %s/%s (%s)\n", o.output_dir.c_str(), file.c_str(),
                file == kSingleFile ? "Hugging Face would load it instead of the new shards"
                                    : "from an earlier export; it would mix with the new files");
  }
  if (!stale.empty()) format::fsync_directory(o.output_dir);
  std::printf("ds-zero-to-fp32: %s (ZeRO stage %d, %d rank file%s) -> %s: %zu tensors, %s in %zu file%s%s; peak RSS %s\n",
              dir.c_str(), m.zero_stage, m.dp_world_size, m.dp_world_size == 1 ? "" : "s", o.output_dir.c_str(),
              items.size(), format_bytes(total).c_str(), shards.size(), shards.size() == 1 ? "" : "s",
              layout.config ? fmt::format(" (Hugging Face {} layout + config.json)", layout.model_type).c_str() : "",
              format_bytes(peak_rss_bytes()).c_str());
  if (!layout.config) std::printf("ds-zero-to-fp32: no config.json written: %s\n", layout.missing_config.c_str());
  if (!reader.verifying())
    std::printf("ds-zero-to-fp32: not verified (%s)\n",
                o.no_verify ? "--no-verify" : "the checkpoint has no checksums: saved by an older deepspeed.cpp");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "ds-zero-to-fp32");  // before any BLAS call (docs/cpu-kernels.md)
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds-zero-to-fp32: error: %s\n", e.what());
    if (std::string(e.what()).find("checksum mismatch") != std::string::npos)
      std::fprintf(stderr, "ds-zero-to-fp32: nothing was written; --no-verify exports the checkpoint as it is\n");
    return 1;
  }
}
