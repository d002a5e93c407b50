#include "checkpoint/layout.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "format/posix_file.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::checkpoint {

using namespace format;  // the file formats (src/format) this layer is built on
namespace fs = std::filesystem;

std::string default_tag(int64_t global_steps) { return "global_step" + std::to_string(global_steps); }

void check_tag(const std::string& tag) {
  DS_CHECK(!tag.empty() && tag != "." && tag != ".." && tag.find('/') == std::string::npos &&
               tag.find('\0') == std::string::npos && tag.size() < 200,
           Error, "checkpoint tag \"" + tag + "\" must be one plain directory name (no '/', not empty)");
  DS_CHECK(!tag.ends_with(".partial") && !tag.ends_with(".old"), Error,
           "checkpoint tag \"" + tag + "\": the suffixes .partial and .old are reserved for saves in progress");
}

std::string model_file_name() { return "mp_rank_00_model_states.safetensors"; }

std::string stage_model_file_name(int stage) { return fmt::format("pipe_stage_{:02d}_model_states.safetensors", stage); }

std::string optim_file_name(int dp_rank, bool bf16) {
  return std::string(bf16 ? "bf16_" : "") + "zero_pp_rank_" + std::to_string(dp_rank) +
         "_mp_rank_00_optim_states.safetensors";
}

std::string tag_dir(const std::string& dir, const std::string& tag) { return (fs::path(dir) / tag).string(); }
std::string partial_dir(const std::string& dir, const std::string& tag) {
  return (fs::path(dir) / (tag + ".partial")).string();
}

namespace {

std::string old_dir(const std::string& dir, const std::string& tag) { return (fs::path(dir) / (tag + ".old")).string(); }

void rename_or_throw(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) throw_errno(from, "rename to " + to, errno);
}

}  // namespace

void prepare_partial_dir(const std::string& dir, const std::string& tag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  DS_CHECK(!ec && fs::is_directory(dir), IoError,
           dir + ": cannot create the checkpoint directory: " + ec.message() +
               " (point save_checkpoint at a writable directory)");
  const std::string partial = partial_dir(dir, tag);
  fs::remove_all(partial, ec);  // a save that died earlier
  DS_CHECK(!ec, IoError, partial + ": cannot remove a stale partial save: " + ec.message());
  fs::create_directory(partial, ec);
  DS_CHECK(!ec, IoError, partial + ": cannot create: " + ec.message());
}

void commit_tag_dir(const std::string& dir, const std::string& tag) {
  const std::string final_dir = tag_dir(dir, tag), partial = partial_dir(dir, tag), old = old_dir(dir, tag);
  std::error_code ec;
  fs::remove_all(old, ec);
  const bool replacing = fs::exists(final_dir);
  if (replacing) rename_or_throw(final_dir, old);
  rename_or_throw(partial, final_dir);
  fsync_directory(dir);
  if (replacing) fs::remove_all(old, ec);  // best effort: the new tag is complete
}

void write_latest(const std::string& dir, const std::string& tag) {
  const std::string path = (fs::path(dir) / kLatestFile).string();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    UniqueFd fd = open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC);
    write_all(fd.get(), tag.data(), tag.size(), tmp);
    fsync_fd(fd.get(), tmp);
    fd.close(tmp);
  }
  rename_or_throw(tmp, path);
  fsync_directory(dir);
}

std::optional<std::string> read_latest(const std::string& dir) {
  const fs::path path = fs::path(dir) / kLatestFile;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string tag = ss.str();
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.front()))) tag.erase(tag.begin());
  DS_CHECK(!tag.empty(), IoError, path.string() + ": empty (it should hold the tag of the newest checkpoint)");
  return tag;
}

std::string resolve_tag_dir(const std::string& dir, const std::string& tag) {
  const std::string final_dir = tag_dir(dir, tag);
  if (fs::is_directory(final_dir)) return final_dir;
  const std::string old = old_dir(dir, tag);
  if (fs::is_directory(old)) {
    log::warn("checkpoint {}: a re-save of this tag was interrupted; loading the previous copy {}", final_dir, old);
    return old;
  }
  if (fs::is_directory(partial_dir(dir, tag)))
    throw IoError(final_dir + ": this checkpoint was never completed (only " + tag +
                  ".partial exists: the save was interrupted); load another tag or the one in 'latest'");
  throw IoError(final_dir + ": no such checkpoint (check the directory and the tag)");
}

namespace {

bool hook_names(const char* variable, const char* point, int rank) {
  const char* at = std::getenv(variable);
  if (at == nullptr) return false;
  const std::string v = at;
  return v == point || v == std::string(point) + "@" + std::to_string(rank);
}

}  // namespace

void crash_point(const char* point, int rank) {
  if (hook_names("DS_CKPT_CRASH_AT", point, rank)) ::kill(::getpid(), SIGKILL);
  if (hook_names("DS_CKPT_STALL_AT", point, rank)) {
    log::warn("DS_CKPT_STALL_AT={}: rank {} stops here until it is killed", point, rank);
    while (true) ::pause();
  }
}

uint64_t tag_digest(const std::string& tag) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : tag) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace ds::checkpoint
