// SafetensorsFile: opens a file, reads and validates only its header, then serves single tensors
// or byte ranges of them with pread, so memory is bounded by what the caller asks for.
#include <fcntl.h>

#include <algorithm>

#include "checkpoint/safetensors.h"
#include "util/error.h"

namespace ds::checkpoint {

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  fd_ = open_file(path_, O_RDONLY);
  file_size_ = checkpoint::file_size(fd_.get(), path_);
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
  header_ = parse_header(bytes.data(), bytes.size(), file_size_, path_);
  index_.reserve(header_.tensors.size());
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_.emplace(header_.tensors[i].name, i);
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
  pread_exact(fd_.get(), dst, length, data_offset() + info.begin + offset, path_);
}

}  // namespace ds::checkpoint
