// The safetensors format's small pieces: the dtype table, the UTF-8 check and the header
// serialisation (encode_header) the writer uses; parsing lives in safetensors_header.cpp.
#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "util/error.h"

namespace ds::format {

namespace {

struct DtypeRow {
  StDtype dtype;
  std::string_view name;
  size_t size;
};

constexpr DtypeRow kDtypes[] = {
    {StDtype::F64, "F64", 8},   {StDtype::F32, "F32", 4},         {StDtype::F16, "F16", 2},
    {StDtype::BF16, "BF16", 2}, {StDtype::I64, "I64", 8},         {StDtype::I32, "I32", 4},
    {StDtype::I16, "I16", 2},   {StDtype::I8, "I8", 1},           {StDtype::U8, "U8", 1},
    {StDtype::BOOL, "BOOL", 1}, {StDtype::U64, "U64", 8},         {StDtype::U32, "U32", 4},
    {StDtype::U16, "U16", 2},   {StDtype::F8_E4M3, "F8_E4M3", 1}, {StDtype::F8_E5M2, "F8_E5M2", 1},
};

const DtypeRow& row(StDtype dtype) {
  for (const DtypeRow& r : kDtypes)
    if (r.dtype == dtype) return r;
  DS_ASSERT(false, "unknown StDtype " + std::to_string(static_cast<int>(dtype)));
  return kDtypes[0];
}

}  // namespace

std::string_view dtype_name(StDtype dtype) { return row(dtype).name; }
size_t dtype_size(StDtype dtype) { return row(dtype).size; }

std::optional<StDtype> dtype_from_name(std::string_view name) {
  for (const DtypeRow& r : kDtypes)
    if (r.name == name) return r.dtype;
  return std::nullopt;
}

int64_t TensorInfo::numel() const {
  // A zero dimension first: [2^62, 2^62, 0] is a valid empty tensor whose running product would
  // overflow. Otherwise validated headers bound the product by the file size.
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    else return i;
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
}

std::string encode_header(const std::vector<TensorInfo>& tensors,
                          const std::vector<std::pair<std::string, std::string>>& metadata) {
  using OJson = nlohmann::ordered_json;
  OJson root = OJson::object();
  if (!metadata.empty()) {
    OJson meta = OJson::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    root["__metadata__"] = std::move(meta);
  }
  for (const TensorInfo& t : tensors) {
    OJson entry = OJson::object();
    entry["dtype"] = dtype_name(t.dtype);
    entry["shape"] = OJson::array();
    for (int64_t d : t.shape) entry["shape"].push_back(d);
    entry["data_offsets"] = OJson::array({t.begin, t.end});
    root[t.name] = std::move(entry);
  }
  std::string json;
  try {
    json = root.dump();  // compact, UTF-8 kept as is: the same bytes as serde_json / json.dumps
  } catch (const nlohmann::json::exception& e) {
    throw IoError(std::string("cannot encode the safetensors header: ") + e.what());
  }
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(kLengthPrefixBytes, '\0');
  uint64_t n = json.size();
  for (size_t i = 0; i < kLengthPrefixBytes; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xFF);
  return out + json;
}

}  // namespace ds::format
