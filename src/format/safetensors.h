// The safetensors file format (https://github.com/huggingface/safetensors), without LibTorch:
// header parsing and validation (parse_header, fuzzable), a reader that reads only the header
// and then single tensors or byte ranges with pread (SafetensorsFile), and an atomic writer that
// streams tensors into a temp file and renames it into place (SafetensorsWriter).
//
// Layout: u64 little-endian N | N bytes of UTF-8 JSON, space-padded | data section.
// JSON: {"__metadata__": {"k": "v", ...}, "name": {"dtype": "F32", "shape": [2, 3],
//        "data_offsets": [begin, end]}, ...}; offsets are relative to the data section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "format/checksums.h"
#include "format/posix_file.h"

namespace ds::format {

// The format's dtype names. The first ten are the ones LibTorch 1.13 has; the unsigned and fp8
// ones are here so any standard file opens and lists (the engine refuses them later, by name).
enum class StDtype : uint8_t {
  F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL,
  U64, U32, U16, F8_E4M3, F8_E5M2,
};

std::string_view dtype_name(StDtype dtype);  // "F32"
std::optional<StDtype> dtype_from_name(std::string_view name);
size_t dtype_size(StDtype dtype);            // bytes per element

inline constexpr uint64_t kLengthPrefixBytes = 8;
// The official reader's limit (MAX_HEADER_SIZE); also bounds what a hostile file makes us allocate.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<int64_t> shape;  // [] is a 0-d tensor (one element)
  // Byte range [begin, end) RELATIVE TO THE DATA SECTION, as written in the header; the absolute
  // file offset is SafetensorsFile::data_offset() + begin.
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t nbytes() const { return end - begin; }
  int64_t numel() const;  // product of shape (1 for 0-d)
};

// A validated header.
struct Header {
  std::vector<TensorInfo> tensors;  // in data order (ascending offsets; header order breaks ties)
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t header_length = 0;                   // N: JSON bytes including padding
  uint64_t data_size = 0;                       // bytes after the header, all covered by tensors
  uint64_t data_offset() const { return kLengthPrefixBytes + header_length; }
};

// Validates the leading bytes of a file. `data`/`size`: the file's first bytes (at least the
// 8-byte prefix and the N header bytes; more is ignored). `file_size`: the whole file's size, so
// the offsets can be checked against the data section. `source` names the file in messages.
// Every violation throws ds::IoError "<source>: <what is wrong>"; nothing else is thrown
// (apart from std::bad_alloc), whatever the bytes. Checks: N <= 100 MB and fits in the file;
// UTF-8; a JSON object; each entry exactly {dtype, shape, data_offsets} with the right types; a
// known dtype; shape dims non-negative, product x dtype size == end - begin without overflow;
// begin <= end <= data size; no duplicate names or metadata keys; tensors tile the data section
// with no overlap and no gap, and cover it to the last byte; __metadata__ values are strings.
Header parse_header(const uint8_t* data, size_t size, uint64_t file_size,
                    std::string_view source = "<memory>");

// Serialises a header exactly as the official writer does for the same order: compact JSON,
// "__metadata__" first (omitted when empty), then the tensors in the given order, padded with
// spaces to a multiple of 8 bytes, prefixed with N. Offsets are taken from `tensors` as given.
std::string encode_header(const std::vector<TensorInfo>& tensors,
                          const std::vector<std::pair<std::string, std::string>>& metadata);

// Validates `text` as UTF-8 (no overlongs, no surrogates, <= U+10FFFF); returns the offset of the
// first bad byte, or nullopt.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// An open safetensors file: the header is read and validated at construction (at most 100 MB,
// never the data); tensors are then read one at a time with pread into the caller's memory.
// Const methods are safe to call from several threads at once.
// With `expected` checksums (format/checksums.h; must outlive the object), the constructor
// checks the file size, the header's CRC and that every tensor has its chunk CRCs, and every read
// verifies the chunks it touches: a mismatch throws ds::IoError naming the file, the tensor, the
// byte range and the expected and actual CRC-32C.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(std::string path, const FileChecksums* expected = nullptr);

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t data_offset() const { return header_.data_offset(); }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }  // data order
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  const TensorInfo& at(std::string_view name) const;    // IoError naming the file when absent

  // Reads the whole tensor; `dst_size` must equal info.nbytes().
  void read(const TensorInfo& info, void* dst, size_t dst_size) const;
  // Reads bytes [offset, offset + length) of the tensor (for readers that need one shard).
  void read_range(const TensorInfo& info, uint64_t offset, void* dst, size_t length) const;

  bool verified() const { return expected_ != nullptr; }

 private:
  void check_expected() const;
  void read_verified(const TensorInfo& info, uint64_t offset, void* dst, size_t length) const;

  std::string path_;
  const FileChecksums* expected_ = nullptr;
  UniqueFd fd_;
  uint64_t file_size_ = 0;
  Header header_;
  std::unordered_map<std::string, size_t> index_;  // name → position in header_.tensors
};

// Writes one safetensors file atomically. add()/add_streamed() record tensors (header order = insertion order,
// data offsets in the same order); commit() writes "<path>.tmp.<pid>", fsyncs it, renames it over
// `path` and fsyncs the directory. Until the rename `path` is untouched (an older file there
// survives any failure); a failed commit removes its temp file. Errors throw ds::IoError naming
// the file, the operation and strerror.
// Test hook: DS_CKPT_FAIL_AFTER_BYTES=<n> in the environment makes commit() fail with an IoError
// once n bytes of the temp file are written (a full disk or a crash mid-write), cleaning up as
// for any real failure.
class SafetensorsWriter {
 public:
  // Receives a tensor's bytes in chunks of any size; together they must total nbytes.
  using ChunkSink = std::function<void(const void* data, size_t size)>;
  // Called once during commit() to stream a tensor without materialising it whole.
  using Producer = std::function<void(const ChunkSink& sink)>;

  explicit SafetensorsWriter(std::string path);

  // Sets a "__metadata__" entry (replacing a previous value of the same key; order of first set).
  void set_metadata(const std::string& key, std::string value);
  // `data` must hold numel x dtype_size bytes and stay valid until commit() returns.
  void add(std::string name, StDtype dtype, std::vector<int64_t> shape, const void* data);
  // Streams the bytes from `producer` during commit() (a distinct name: add(..., nullptr) for an
  // empty tensor would otherwise be ambiguous).
  void add_streamed(std::string name, StDtype dtype, std::vector<int64_t> shape, Producer producer);

  // The tensors as they will be laid out (offsets relative to the data section).
  std::vector<TensorInfo> layout() const;
  // Writes, syncs and renames into place; call once.
  void commit();
  // After commit(): the file's checksums, computed from the bytes as they were written.
  const FileChecksums& checksums() const { return checksums_; }

 private:
  struct Pending {
    TensorInfo info;
    const void* data = nullptr;
    Producer producer;
  };
  void add_pending(std::string name, StDtype dtype, std::vector<int64_t> shape, Pending pending);
  void write_to(const std::string& tmp_path);

  std::string path_;
  std::vector<Pending> tensors_;
  std::unordered_map<std::string, size_t> names_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  uint64_t data_bytes_ = 0;
  bool committed_ = false;
  FileChecksums checksums_;
};

}  // namespace ds::format
