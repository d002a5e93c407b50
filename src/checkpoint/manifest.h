// manifest.json: the table of contents of one checkpoint tag. For every trainable parameter its
// name, shape and model dtype, and which rank file holds which global [offset, offset + length)
// of its fp32 master and of each optimizer state (tensor "<state>/<name>@<offset>" in that file);
// the engine's counters, loss scaler, LR schedule and optimizer step state; the config used; and
// the user's client_state; and the checksums of every other file of the tag (format/checksums.h).
// Everything a loader at any world size needs to find its slices and verify them, without opening
// more than the headers of the rank files.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "format/checksums.h"

namespace ds::checkpoint {

inline constexpr int kManifestVersion = 1;
inline constexpr const char* kMasterState = "fp32";  // the fp32 master weights' state name

struct PieceRef {
  int rank = 0;         // index into Manifest::rank_files
  int64_t offset = 0;   // elements into the flattened parameter
  int64_t length = 0;
};

struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;              // the model dtype at save ("fp32", "bf16", "fp16")
  std::vector<PieceRef> pieces;   // sorted by offset; they tile [0, numel) exactly
  int64_t numel() const;
};

// A pipeline stage's frozen parameters and buffers that no earlier stage holds (stage 0's are in
// Manifest::model_file): each stage writes what only it has, so no rank gathers the frozen model.
struct StageModelFile {
  std::string file;                  // relative to the tag directory
  std::vector<std::string> tensors;  // model order
};

struct Manifest {
  int version = kManifestVersion;
  std::string tag;
  int zero_stage = 0;
  int dp_world_size = 1;
  std::vector<std::string> rank_files;   // rank r's pieces, relative to the tag directory
  std::string model_file;                // frozen parameters and buffers (rank 0), relative
  std::vector<std::string> states;       // "fp32" first, then the optimizer's ("exp_avg", ...)
  std::vector<ParamEntry> params;        // trainable parameters, model order
  std::vector<std::string> module_tensors;  // frozen parameters and buffers in model_file
  std::vector<StageModelFile> stage_model_files;  // pipelines: the later stages' (absent in older tags)
  nlohmann::json engine = nlohmann::json::object();        // counters, scaler, schedule, optimizer
  nlohmann::json ds_config = nlohmann::json::object();     // the config the run was started with
  nlohmann::json client_state = nlohmann::json::object();  // the user's, returned by load
  // By file name (each rank file and the model file); empty in checkpoints saved before checksums
  // existed, which load unverified with a warning.
  std::map<std::string, format::FileChecksums> checksums;

  const ParamEntry* find(const std::string& name) const;
  // The file holding frozen parameter or buffer `name` (model_file or a stage's); null when none does.
  const std::string* module_file_of(const std::string& name) const;
  // model_file, then each stage's file.
  std::vector<std::string> model_files() const;
};

// "<state>/<param>@<offset>": the tensor holding one piece of one state in a rank file.
std::string piece_tensor_name(const std::string& state, const std::string& param, int64_t offset);
// The inverse; false when `tensor` is not a piece name.
bool parse_piece_tensor_name(const std::string& tensor, std::string* state, std::string* param, int64_t* offset);

nlohmann::json to_json(const Manifest& m);
// Validates the structure (types, version, piece tiling, rank indices, a checksum entry for every
// file when there are checksums) and throws ds::IoError
// "<source>: <what is wrong>" for a manifest that is not one we wrote.
Manifest manifest_from_json(const nlohmann::json& j, const std::string& source);

void write_manifest(const Manifest& m, const std::string& path);  // atomic, like every file we write
Manifest read_manifest(const std::string& path);

}  // namespace ds::checkpoint
