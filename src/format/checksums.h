// Checksums of checkpoint files: CRC-32C (util/crc32c.h) of each safetensors file's header and of
// each tensor's data in chunks of kChecksumChunkBytes, computed by the writer as the bytes go out
// (no second read) and recorded in the tag's manifest. Together they cover every byte of the file.
// A reader verifies exactly the chunks it reads: a whole-tensor read costs no extra I/O; a read of
// part of a tensor (a reshard) reads at most one extra chunk at each end.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ds::format {

inline constexpr uint64_t kChecksumChunkBytes = uint64_t{1} << 20;
inline constexpr const char* kChecksumAlgorithm = "crc32c";

struct FileChecksums {
  uint64_t size = 0;         // bytes of the whole file
  uint32_t header = 0;       // CRC-32C of the length prefix and the JSON header
  uint64_t chunk_bytes = kChecksumChunkBytes;
  // Per tensor: the CRC-32C of each chunk_bytes of its data (the last one shorter; none when empty).
  std::map<std::string, std::vector<uint32_t>> tensors;
};

// Number of chunks of a tensor of `nbytes`.
inline uint64_t chunk_count(uint64_t nbytes, uint64_t chunk_bytes) { return (nbytes + chunk_bytes - 1) / chunk_bytes; }

std::string crc_hex(uint32_t crc);  // "e3069283"

// {"size": N, "chunk_bytes": C, "header": "hex", "tensors": {"name": ["hex", ...]}}
nlohmann::json to_json(const FileChecksums& c);
// Throws ds::IoError "<source>: ..." for anything else.
FileChecksums file_checksums_from_json(const nlohmann::json& j, const std::string& source);

// Feeds one tensor's bytes (in pieces of any size) and cuts them into chunk CRCs.
class ChunkedCrc {
 public:
  explicit ChunkedCrc(uint64_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}
  void update(const void* data, size_t n);
  std::vector<uint32_t> finish();  // the CRCs; the object is spent

 private:
  uint64_t chunk_bytes_;
  uint64_t filled_ = 0;
  uint32_t crc_ = 0;
  std::vector<uint32_t> crcs_;
};

}  // namespace ds::format
