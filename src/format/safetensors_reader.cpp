// SafetensorsFile: opens a file, reads and validates only its header, then serves single tensors
// or byte ranges of them with pread, so memory is bounded by what the caller asks for.
#include <fcntl.h>

#include <algorithm>

#include "format/safetensors.h"
#include "util/crc32c.h"
#include "util/error.h"

namespace ds::format {

namespace {
constexpr const char* kCorruptHint =
    "bit rot, a bad copy or a failing disk; restore this file from a good copy or load another checkpoint tag";
}  // namespace

SafetensorsFile::SafetensorsFile(std::string path, const FileChecksums* expected)
    : path_(std::move(path)), expected_(expected) {
  fd_ = open_file(path_, O_RDONLY);
  file_size_ = format::file_size(fd_.get(), path_);
  if (expected_ && file_size_ != expected_->size)
    throw IoError(path_ + ": the file has " + std::to_string(file_size_) + " bytes but the checkpoint manifest recorded " +
                  std::to_string(expected_->size) + " (truncated, or replaced by another file); " + kCorruptHint);
  // Read the length prefix first: the header allocation is then checked against the file size and
  // the 100 MB limit before anything is allocated.
  uint8_t prefix[kLengthPrefixBytes] = {};
  const size_t prefix_bytes = static_cast<size_t>(std::min<uint64_t>(file_size_, kLengthPrefixBytes));
  pread_exact(fd_.get(), prefix, prefix_bytes, 0, path_);
  if (file_size_ < kLengthPrefixBytes) parse_header(prefix, prefix_bytes, file_size_, path_);  // throws
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  if (n > file_size_ - kLengthPrefixBytes || n > kMaxHeaderBytes) {
    parse_header(prefix, prefix_bytes, file_size_, path_);  // throws the size message
  }
  std::vector<uint8_t> bytes(kLengthPrefixBytes + n);
  std::copy(prefix, prefix + kLengthPrefixBytes, bytes.begin());
  pread_exact(fd_.get(), bytes.data() + kLengthPrefixBytes, n, kLengthPrefixBytes, path_);
  if (expected_) {
    const uint32_t actual = crc32c(bytes.data(), bytes.size());
    if (actual != expected_->header)
      throw IoError(path_ + ": checksum mismatch in the header (its first " + std::to_string(bytes.size()) +
                    " bytes): expected crc32c " + crc_hex(expected_->header) + ", actual " + crc_hex(actual) +
                    "; the file is corrupted: " + kCorruptHint);
  }
  header_ = parse_header(bytes.data(), bytes.size(), file_size_, path_);
  index_.reserve(header_.tensors.size());
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_.emplace(header_.tensors[i].name, i);
  if (expected_) check_expected();
}

void SafetensorsFile::check_expected() const {
  // The header matched its CRC, so a disagreement here is a manifest of another save of this file.
  const auto mixed = [&](const std::string& what) {
    throw IoError(path_ + ": " + what + " (the manifest's checksums are of another save of this file: were files of two "
                  "checkpoints mixed?)");
  };
  if (expected_->tensors.size() != header_.tensors.size())
    mixed("the manifest lists checksums of " + std::to_string(expected_->tensors.size()) + " tensors, the file holds " +
          std::to_string(header_.tensors.size()));
  for (const auto& t : header_.tensors) {
    const auto it = expected_->tensors.find(t.name);
    if (it == expected_->tensors.end()) mixed("the manifest has no checksums of tensor '" + t.name + "'");
    if (it->second.size() != chunk_count(t.nbytes(), expected_->chunk_bytes))
      mixed("tensor '" + t.name + "' has " + std::to_string(t.nbytes()) + " bytes but " +
            std::to_string(it->second.size()) + " chunk checksums in the manifest");
  }
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

const TensorInfo& SafetensorsFile::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) {
    throw IoError(path_ + ": no tensor named '" + std::string(name) + "' (the file holds " +
                  std::to_string(header_.tensors.size()) + " tensors)");
  }
  return *t;
}

void SafetensorsFile::read(const TensorInfo& info, void* dst, size_t dst_size) const {
  if (dst_size != info.nbytes()) {
    throw IoError(path_ + ": tensor '" + info.name + "' holds " + std::to_string(info.nbytes()) +
                  " bytes but the destination buffer has " + std::to_string(dst_size));
  }
  read_range(info, 0, dst, dst_size);
}

void SafetensorsFile::read_range(const TensorInfo& info, uint64_t offset, void* dst, size_t length) const {
  // Checked without overflow and against the data section, so a TensorInfo from another file (or
  // a hand-made one) can never read outside this file's tensor bytes.
  if (offset > info.nbytes() || length > info.nbytes() - offset) {
    throw IoError(path_ + ": byte range [" + std::to_string(offset) + ", +" + std::to_string(length) +
                  ") is outside tensor '" + info.name + "' (" + std::to_string(info.nbytes()) + " bytes)");
  }
  if (info.begin > info.end || info.end > header_.data_size) {
    throw IoError(path_ + ": tensor '" + info.name + "' offsets do not belong to this file");
  }
  if (length == 0) return;
  if (expected_) return read_verified(info, offset, dst, length);
  pread_exact(fd_.get(), dst, length, data_offset() + info.begin + offset, path_);
}

void SafetensorsFile::read_verified(const TensorInfo& info, uint64_t offset, void* dst, size_t length) const {
  const TensorInfo* own = find(info.name);
  if (own == nullptr || own->begin != info.begin || own->end != info.end)
    throw IoError(path_ + ": tensor '" + info.name + "' is not this file's (no checksums to verify it against)");
  const std::vector<uint32_t>& crcs = expected_->tensors.at(info.name);
  const uint64_t chunk = expected_->chunk_bytes, nbytes = info.nbytes();
  const uint64_t a = offset, b = offset + length;
  auto chunk_end = [&](uint64_t c) { return std::min((c + 1) * chunk, nbytes); };
  auto verify = [&](uint64_t c, const void* bytes) {
    const uint64_t lo = c * chunk, hi = chunk_end(c);
    const uint32_t actual = crc32c(bytes, static_cast<size_t>(hi - lo));
    if (actual != crcs[c])
      throw IoError(path_ + ": checksum mismatch in tensor '" + info.name + "', bytes [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + ") of its data (file offset " + std::to_string(data_offset() + info.begin + lo) +
                    "): expected crc32c " + crc_hex(crcs[c]) + ", actual " + crc_hex(actual) +
                    "; the file is corrupted: " + kCorruptHint);
  };
  // Chunks wholly inside [a, b) are read straight into dst; the (at most two) chunks cut by a or b
  // are read whole into a scratch buffer, verified, and their overlap copied.
  const uint64_t first = a / chunk, last = (b - 1) / chunk;
  const uint64_t whole_lo = (a + chunk - 1) / chunk;
  const uint64_t whole_hi = b == nbytes ? last + 1 : b / chunk;  // one past the last whole chunk
  auto* out = static_cast<uint8_t*>(dst);
  if (whole_lo < whole_hi) {
    const uint64_t lo = whole_lo * chunk, hi = chunk_end(whole_hi - 1);
    pread_exact(fd_.get(), out + (lo - a), static_cast<size_t>(hi - lo), data_offset() + info.begin + lo, path_);
    for (uint64_t c = whole_lo; c < whole_hi; ++c) verify(c, out + (c * chunk - a));
  }
  std::vector<uint8_t> scratch;
  for (uint64_t c = first; c <= last; ++c) {
    if (c >= whole_lo && c < whole_hi) continue;
    const uint64_t lo = c * chunk, hi = chunk_end(c);
    scratch.resize(static_cast<size_t>(hi - lo));
    pread_exact(fd_.get(), scratch.data(), scratch.size(), data_offset() + info.begin + lo, path_);
    verify(c, scratch.data());
    const uint64_t from = std::max(a, lo), to = std::min(b, hi);
    std::copy(scratch.begin() + static_cast<ptrdiff_t>(from - lo), scratch.begin() + static_cast<ptrdiff_t>(to - lo),
              out + (from - a));
  }
}

}  // namespace ds::format
