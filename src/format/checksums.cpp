#include "format/checksums.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "util/crc32c.h"
#include "util/error.h"

namespace ds::format {
using nlohmann::json;

std::string crc_hex(uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", crc);
  return buf;
}

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw IoError(source + ": " + what);
}

uint32_t crc_from_hex(const json& j, const std::string& source) {
  if (!j.is_string()) bad(source, "a CRC is not a string");
  const auto& s = j.get_ref<const std::string&>();
  if (s.size() != 8 || !std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    bad(source, "a CRC is not 8 hex digits");
  return static_cast<uint32_t>(std::stoul(s, nullptr, 16));
}

uint64_t unsigned_field(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || !j.at(key).is_number_unsigned()) bad(source, std::string("\"") + key + "\" is missing or not a non-negative integer");
  return j.at(key).get<uint64_t>();
}

}  // namespace

json to_json(const FileChecksums& c) {
  json tensors = json::object();
  for (const auto& [name, crcs] : c.tensors) {
    json list = json::array();
    for (uint32_t crc : crcs) list.push_back(crc_hex(crc));
    tensors[name] = std::move(list);
  }
  return {{"size", c.size}, {"chunk_bytes", c.chunk_bytes}, {"header", crc_hex(c.header)}, {"tensors", tensors}};
}

FileChecksums file_checksums_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) bad(source, "not an object");
  FileChecksums c;
  c.size = unsigned_field(j, "size", source);
  c.chunk_bytes = unsigned_field(j, "chunk_bytes", source);
  if (c.chunk_bytes == 0 || c.chunk_bytes > (uint64_t{1} << 32)) bad(source, "chunk_bytes out of range");
  if (!j.contains("header")) bad(source, "\"header\" is missing");
  c.header = crc_from_hex(j.at("header"), source);
  if (!j.contains("tensors") || !j.at("tensors").is_object()) bad(source, "\"tensors\" is missing or not an object");
  for (const auto& [name, list] : j.at("tensors").items()) {
    if (!list.is_array()) bad(source, "tensor '" + name + "': not an array");
    // Each chunk is at least one byte of the file: more CRCs than bytes is a manifest we did not write
    // (and bounds what a hostile manifest makes us allocate).
    if (list.size() > c.size) bad(source, "tensor '" + name + "': more chunks than the file has bytes");
    std::vector<uint32_t> crcs;
    crcs.reserve(list.size());
    for (const auto& e : list) crcs.push_back(crc_from_hex(e, source));
    c.tensors.emplace(name, std::move(crcs));
  }
  return c;
}

void ChunkedCrc::update(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, chunk_bytes_ - filled_));
    crc_ = crc32c(p, take, crc_);
    filled_ += take;
    p += take;
    n -= take;
    if (filled_ == chunk_bytes_) {
      crcs_.push_back(crc_);
      crc_ = 0;
      filled_ = 0;
    }
  }
}

std::vector<uint32_t> ChunkedCrc::finish() {
  if (filled_ > 0) crcs_.push_back(crc_);
  filled_ = 0;
  crc_ = 0;
  return std::move(crcs_);
}

}  // namespace ds::format
