// SafetensorsWriter: records tensors, then writes them into "<path>.tmp.<pid>", fsyncs, renames
// over <path> and fsyncs the directory, so readers see the old file or the new one, never half.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>

#include "format/safetensors.h"
#include "util/crc32c.h"
#include "util/error.h"

namespace ds::format {

namespace {

constexpr const char* kFailEnv = "DS_CKPT_FAIL_AFTER_BYTES";

// The test hook (docs/checkpoint.md): read at each commit, not cached, so a test can set it for
// one save and unset it for the next.
std::optional<uint64_t> fail_after_bytes() {
  const char* v = std::getenv(kFailEnv);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*end != '\0' || errno != 0 || v[0] == '-' || v[0] == '+' || v[0] == ' ') {
    throw ConfigError(kFailEnv, "'" + std::string(v) + "' is not a byte count (unset it, or set a non-negative integer)");
  }
  return n;
}

// Writes the temp file through a 1 MiB buffer (producers may hand over a few bytes at a time)
// and counts bytes for the fail hook.
class TempFileSink {
 public:
  TempFileSink(int fd, const std::string& tmp, std::optional<uint64_t> fail_after)
      : fd_(fd), tmp_(tmp), fail_after_(fail_after) {
    buf_.reserve(kBufferBytes);
  }

  void write(const void* data, size_t n) {
    if (n >= kBufferBytes) {
      flush();
      write_through(data, n);
      return;
    }
    if (buf_.size() + n > kBufferBytes) flush();
    const auto* p = static_cast<const char*>(data);
    buf_.insert(buf_.end(), p, p + n);
  }

  void flush() {
    if (buf_.empty()) return;
    write_through(buf_.data(), buf_.size());
    buf_.clear();
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  void write_through(const void* data, size_t n) {
    if (fail_after_ && n > *fail_after_ - written_) {
      write_all(fd_, data, static_cast<size_t>(*fail_after_ - written_), tmp_);
      throw IoError(tmp_ + ": write failed after " + std::to_string(*fail_after_) + " bytes: injected by " +
                    kFailEnv + "=" + std::to_string(*fail_after_) + " (a simulated full disk or crash)");
    }
    write_all(fd_, data, n, tmp_);
    written_ += n;
  }

  int fd_;
  const std::string& tmp_;
  std::optional<uint64_t> fail_after_;
  uint64_t written_ = 0;
  std::vector<char> buf_;
};

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::string path) : path_(std::move(path)) {}

void SafetensorsWriter::set_metadata(const std::string& key, std::string value) {
  if (find_invalid_utf8(key) || find_invalid_utf8(value))
    throw IoError(path_ + ": __metadata__ key '" + key + "' or its value is not valid UTF-8");
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void SafetensorsWriter::add(std::string name, StDtype dtype, std::vector<int64_t> shape, const void* data) {
  Pending p;
  p.data = data;
  add_pending(std::move(name), dtype, std::move(shape), std::move(p));
}

void SafetensorsWriter::add_streamed(std::string name, StDtype dtype, std::vector<int64_t> shape, Producer producer) {
  if (!producer) throw IoError(path_ + ": tensor '" + name + "': empty producer callback");
  Pending p;
  p.producer = std::move(producer);
  add_pending(std::move(name), dtype, std::move(shape), std::move(p));
}

void SafetensorsWriter::add_pending(std::string name, StDtype dtype, std::vector<int64_t> shape, Pending p) {
  auto fail = [&](const std::string& what) { throw IoError(path_ + ": tensor '" + name + "': " + what); };
  if (committed_) fail("added after commit()");
  if (name == "__metadata__") fail("the name is reserved by the format for metadata");
  if (find_invalid_utf8(name)) fail("the name is not valid UTF-8");
  if (names_.count(name)) fail("added twice");
  uint64_t numel = 1;
  for (int64_t d : shape)
    if (d < 0) fail("negative dimension " + std::to_string(d));
  for (int64_t d : shape) {
    if (d == 0) numel = 0;
    if (numel != 0 && __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
      fail("too many elements (overflows 64 bits)");
  }
  uint64_t nbytes = 0;
  uint64_t end = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(dtype)), &nbytes) ||
      __builtin_add_overflow(data_bytes_, nbytes, &end))
    fail("too many bytes (overflows 64 bits)");
  if (!p.producer && p.data == nullptr && nbytes > 0) fail("null data pointer for " + std::to_string(nbytes) + " bytes");
  p.info = TensorInfo{name, dtype, std::move(shape), data_bytes_, end};
  data_bytes_ = end;
  names_.emplace(std::move(name), tensors_.size());
  tensors_.push_back(std::move(p));
}

std::vector<TensorInfo> SafetensorsWriter::layout() const {
  std::vector<TensorInfo> out;
  out.reserve(tensors_.size());
  for (const Pending& p : tensors_) out.push_back(p.info);
  return out;
}

void SafetensorsWriter::write_to(const std::string& tmp) {
  const std::optional<uint64_t> fail_after = fail_after_bytes();
  const std::string header = encode_header(layout(), metadata_);
  UniqueFd fd = open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  TempFileSink sink(fd.get(), tmp, fail_after);
  // Checksums (format/checksums.h) are taken from the bytes on their way out: no second read.
  checksums_ = FileChecksums{};
  checksums_.size = header.size() + data_bytes_;
  checksums_.header = crc32c(header.data(), header.size());
  sink.write(header.data(), header.size());
  for (const Pending& p : tensors_) {
    const uint64_t want = p.info.nbytes();
    ChunkedCrc crc(checksums_.chunk_bytes);
    if (!p.producer) {
      // A cache-sized piece at a time: the write(2) copy finds in cache what the CRC just read.
      const auto* bytes = static_cast<const char*>(p.data);
      for (uint64_t at = 0; at < want; at += kChecksumChunkBytes) {
        const size_t n = static_cast<size_t>(std::min(kChecksumChunkBytes, want - at));
        crc.update(bytes + at, n);
        sink.write(bytes + at, n);
      }
      checksums_.tensors[p.info.name] = crc.finish();
      continue;
    }
    uint64_t got = 0;
    const ChunkSink chunk = [&](const void* data, size_t n) {
      if (n > want - got) {
        throw IoError(path_ + ": the producer of tensor '" + p.info.name + "' wrote more than its " +
                      std::to_string(want) + " bytes");
      }
      if (n > 0) {
        crc.update(data, n);
        sink.write(data, n);
      }
      got += n;
    };
    p.producer(chunk);
    if (got != want) {
      throw IoError(path_ + ": the producer of tensor '" + p.info.name + "' wrote " + std::to_string(got) +
                    " of its " + std::to_string(want) + " bytes");
    }
    checksums_.tensors[p.info.name] = crc.finish();
  }
  sink.flush();
  fsync_fd(fd.get(), tmp);
  fd.close(tmp);
}

void SafetensorsWriter::commit() {
  if (committed_) throw IoError(path_ + ": commit() called twice");
  committed_ = true;
  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
  try {
    write_to(tmp);
  } catch (...) {
    ::unlink(tmp.c_str());  // best effort: a missing directory leaves nothing to remove
    throw;
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(path_, "rename from " + tmp, err);
  }
  try {
    fsync_directory(parent_directory(path_));
  } catch (const IoError& e) {
    throw IoError(path_ + ": written and renamed, but syncing its directory failed, so the rename may not "
                  "survive a power loss: " + e.what());
  }
}

}  // namespace ds::format
