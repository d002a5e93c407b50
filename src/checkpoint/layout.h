// Where a checkpoint's files live and how a save becomes visible (reference §11.1):
//
//   <dir>/latest                                   the newest complete tag (text), replaced last
//   <dir>/<tag>/manifest.json                      what is where (checkpoint/manifest.h)
//   <dir>/<tag>/mp_rank_00_model_states.safetensors            rank 0: frozen parameters, buffers
//   <dir>/<tag>/[bf16_]zero_pp_rank_<r>_mp_rank_00_optim_states.safetensors   rank r: its pieces
//
// A save writes into <dir>/<tag>.partial/ and renames it to <tag> only when every rank's files and
// the manifest are on disk, then replaces `latest`; so a crash at any point leaves the previous
// checkpoint (and `latest`) as they were. Re-saving an existing tag moves the old one to
// <tag>.old for the instant between the two renames; a load that finds only <tag>.old uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ds::checkpoint {

inline constexpr const char* kLatestFile = "latest";
inline constexpr const char* kManifestFile = "manifest.json";

std::string default_tag(int64_t global_steps);  // DeepSpeed's "global_step<N>"
// Throws ds::Error for tags that are not one plain directory name.
void check_tag(const std::string& tag);

std::string model_file_name();                         // "mp_rank_00_model_states.safetensors"
// Pipeline stage s >= 1's frozen parameters and buffers: "pipe_stage_<ss>_model_states.safetensors".
std::string stage_model_file_name(int stage);
std::string optim_file_name(int dp_rank, bool bf16);   // "[bf16_]zero_pp_rank_<r>_mp_rank_00_optim_states.safetensors"

std::string tag_dir(const std::string& dir, const std::string& tag);
std::string partial_dir(const std::string& dir, const std::string& tag);

// Rank 0, before the ranks write: creates <dir> and an empty <tag>.partial/ (removing a stale one).
void prepare_partial_dir(const std::string& dir, const std::string& tag);
// Rank 0, after every rank's files and the manifest are in <tag>.partial/: makes it <tag>.
void commit_tag_dir(const std::string& dir, const std::string& tag);
// Rank 0, last: `latest` ← tag, atomically (temp file, fsync, rename, directory fsync).
void write_latest(const std::string& dir, const std::string& tag);

// The tag in <dir>/latest (whitespace trimmed); nullopt when there is no such file.
std::optional<std::string> read_latest(const std::string& dir);
// The directory holding `tag`'s complete files: <tag>, or <tag>.old when a re-save was cut short
// between its renames; throws ds::IoError naming what is missing (an interrupted save, a wrong tag).
std::string resolve_tag_dir(const std::string& dir, const std::string& tag);

// Test hooks at the points of a save ("rank_file", "model_file", "manifest", "commit"), so tests can
// check what a failure there leaves: DS_CKPT_CRASH_AT=<point> kills this process with SIGKILL;
// DS_CKPT_STALL_AT=<point> stops it there until it is killed (a host that cannot finish its part
// of a save). Either may name one rank: <point>@<rank> (`rank` is this process's global rank).
void crash_point(const char* point, int rank);

// FNV-1a of the tag: ranks compare it (max == min) for checkpoint.tag_validation.
uint64_t tag_digest(const std::string& tag);

}  // namespace ds::checkpoint
