// Validation of untrusted safetensors header bytes (parse_header). Parsing is a SAX pass over
// nlohmann's lexer, so every event is checked where it happens: a hostile header can neither
// nest deeper than the format's three levels nor smuggle in duplicates that a DOM parser would
// silently merge.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "util/error.h"

namespace ds::format {

namespace {

// Names and values come from untrusted files: keep messages short.
std::string clip(std::string_view s, size_t max = 80) {
  if (s.size() <= max) return std::string(s);
  return std::string(s.substr(0, max)) + "... (" + std::to_string(s.size()) + " bytes)";
}
// Built with append, not "literal" + std::string&&, which trips GCC 12's -Wrestrict false positive.
std::string quote(std::string_view s) {
  std::string out = "'";
  return out.append(clip(s)).append("'");
}

std::string offsets_text(const TensorInfo& t) {
  std::string out = "[";
  return out.append(std::to_string(t.begin)).append(", ").append(std::to_string(t.end)).append("]");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Walks nlohmann's SAX events through the four places a value may sit: the root object,
// "__metadata__", a tensor entry, and a shape / data_offsets array. Anything else throws.
class HeaderSax {
 public:
  using Json = nlohmann::json;

  HeaderSax(std::string_view source, uint64_t data_size) : source_(source), data_size_(data_size) {}

  bool null() { return bad_value("null"); }
  bool boolean(bool) { return bad_value("a boolean"); }
  bool number_integer(Json::number_integer_t v) {
    return bad_value("the negative number " + std::to_string(v));
  }
  bool number_float(Json::number_float_t, const std::string& text) {
    return bad_value("the number " + clip(text) + " (not an integer that fits in 64 bits)");
  }
  bool binary(Json::binary_t&) { return bad_value("binary data"); }
  bool start_array(size_t) {
    if (state_ == State::kEntry && field_ == Field::kShape) return state_ = State::kShape, true;
    if (state_ == State::kEntry && field_ == Field::kOffsets) return state_ = State::kOffsets, true;
    return bad_value("an array");
  }

  bool number_unsigned(Json::number_unsigned_t v) {
    if (state_ == State::kShape) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(tensor_ctx() + "shape entry " + std::to_string(v) + " exceeds 2^63-1");
      entry_.shape.push_back(static_cast<int64_t>(v));
      return true;
    }
    if (state_ == State::kOffsets) {
      if (offsets_.size() == 2) fail(tensor_ctx() + "data_offsets must be [begin, end], got more than 2 entries");
      offsets_.push_back(v);
      return true;
    }
    return bad_value("the number " + std::to_string(v));
  }

  bool string(std::string& v) {
    if (state_ == State::kMetadata) {
      header_.metadata.emplace(meta_key_, std::move(v));
      return true;
    }
    if (state_ == State::kEntry && field_ == Field::kDtype) {
      const std::optional<StDtype> d = dtype_from_name(v);
      if (!d) {
        fail(tensor_ctx() + "unknown dtype " + quote(v) +
             " (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL U64 U32 U16 F8_E4M3 F8_E5M2)");
      }
      entry_.dtype = *d;
      return true;
    }
    return bad_value("a string");
  }

  bool start_object(size_t) {
    if (state_ == State::kStart) return state_ = State::kRoot, true;
    if (state_ == State::kRoot && key_is_metadata_) return state_ = State::kMetadata, true;
    if (state_ == State::kRoot) {
      entry_ = TensorInfo{};
      entry_.name = std::move(pending_name_);
      seen_ = {};
      offsets_.clear();
      state_ = State::kEntry;
      return true;
    }
    return bad_value("an object");
  }

  bool key(std::string& k) {
    switch (state_) {
      case State::kRoot:
        key_is_metadata_ = k == "__metadata__";
        if (key_is_metadata_) {
          if (seen_metadata_) fail("\"__metadata__\" appears twice in the header");
          seen_metadata_ = true;
        } else if (!names_.insert(k).second) {
          fail("tensor " + quote(k) + " appears twice in the header");
        }
        pending_name_ = std::move(k);
        return true;
      case State::kMetadata:
        if (header_.metadata.count(k)) fail("__metadata__ key " + quote(k) + " appears twice");
        meta_key_ = std::move(k);
        return true;
      case State::kEntry: {
        int slot = k == "dtype" ? 0 : k == "shape" ? 1 : k == "data_offsets" ? 2 : -1;
        if (slot < 0) {
          fail(tensor_ctx() + "unexpected key " + quote(k) +
               " (an entry has exactly \"dtype\", \"shape\" and \"data_offsets\")");
        }
        if (seen_[slot]) fail(tensor_ctx() + "key " + quote(k) + " appears twice");
        seen_[slot] = true;
        field_ = static_cast<Field>(slot);
        return true;
      }
      default:
        DS_ASSERT(false, "JSON key outside an object");
        return false;
    }
  }

  bool end_array() {
    if (state_ == State::kOffsets && offsets_.size() != 2) {
      fail(tensor_ctx() + "data_offsets must be [begin, end], got " + std::to_string(offsets_.size()) +
           " entries");
    }
    state_ = State::kEntry;
    return true;
  }

  bool end_object() {
    if (state_ == State::kMetadata) return state_ = State::kRoot, true;
    if (state_ == State::kRoot) return state_ = State::kDone, true;
    finish_entry();
    state_ = State::kRoot;
    return true;
  }

  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& ex) {
    fail("header is not valid JSON: " + clip(ex.what(), 300));
  }

  Header take() { return std::move(header_); }

 private:
  enum class State { kStart, kRoot, kMetadata, kEntry, kShape, kOffsets, kDone };
  enum class Field { kDtype = 0, kShape = 1, kOffsets = 2 };

  [[noreturn]] void fail(const std::string& what) const {
    throw IoError(std::string(source_) + ": " + what);
  }
  std::string tensor_ctx() const { return "tensor " + quote(entry_.name) + ": "; }

  // A value of the wrong kind: the message says where it sits and what was expected there.
  bool bad_value(const std::string& got) {
    switch (state_) {
      case State::kStart:
        fail("the header must be a JSON object, got " + got);
      case State::kRoot:
        if (key_is_metadata_) fail("\"__metadata__\" must be an object of strings, got " + got);
        fail("tensor " + quote(pending_name_) +
             ": entry must be an object {\"dtype\", \"shape\", \"data_offsets\"}, got " + got);
      case State::kMetadata:
        fail("__metadata__ " + quote(meta_key_) + ": value must be a string, got " + got);
      case State::kEntry:
        if (field_ == Field::kDtype) fail(tensor_ctx() + "dtype must be a string, got " + got);
        if (field_ == Field::kShape)
          fail(tensor_ctx() + "shape must be an array of non-negative integers, got " + got);
        fail(tensor_ctx() + "data_offsets must be an array [begin, end], got " + got);
      case State::kShape:
        fail(tensor_ctx() + "shape entries must be non-negative integers, got " + got);
      case State::kOffsets:
        fail(tensor_ctx() + "data_offsets entries must be non-negative integers, got " + got);
      default:
        fail("unexpected " + got + " after the header object");
    }
  }

  void finish_entry() {
    static constexpr const char* kNames[] = {"dtype", "shape", "data_offsets"};
    for (int i = 0; i < 3; ++i)
      if (!seen_[i]) fail(tensor_ctx() + "missing \"" + kNames[i] + "\"");
    TensorInfo& t = entry_;
    t.begin = offsets_[0];
    t.end = offsets_[1];
    if (t.begin > t.end) fail(tensor_ctx() + "data_offsets " + offsets_text(t) + " end before they begin");
    if (t.end > data_size_) {
      fail(tensor_ctx() + "data_offsets " + offsets_text(t) + " extend past the data section, which holds " +
           std::to_string(data_size_) + " bytes (truncated file?)");
    }
    // Element count with overflow checks; a zero dimension makes the product 0 whatever the others.
    uint64_t numel = 1;
    const bool has_zero = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
    if (has_zero) numel = 0;
    for (int64_t d : t.shape) {
      if (has_zero) break;
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
        fail(tensor_ctx() + "shape " + shape_text(t.shape) + " has more elements than fit in 64 bits");
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(t.dtype)), &nbytes))
      fail(tensor_ctx() + "shape " + shape_text(t.shape) + " needs more bytes than fit in 64 bits");
    if (nbytes != t.nbytes()) {
      fail(tensor_ctx() + "shape " + shape_text(t.shape) + " of " + std::string(dtype_name(t.dtype)) +
           " needs " + std::to_string(nbytes) + " bytes but data_offsets " + offsets_text(t) + " hold " +
           std::to_string(t.nbytes()));
    }
    header_.tensors.push_back(std::move(t));
  }

  std::string_view source_;
  uint64_t data_size_;
  State state_ = State::kStart;
  Field field_ = Field::kDtype;
  bool key_is_metadata_ = false;
  bool seen_metadata_ = false;
  std::array<bool, 3> seen_ = {false, false, false};
  std::string pending_name_;
  std::string meta_key_;
  TensorInfo entry_;
  std::vector<uint64_t> offsets_;
  std::unordered_set<std::string> names_;
  Header header_;
};

}  // namespace

Header parse_header(const uint8_t* data, size_t size, uint64_t file_size, std::string_view source) {
  const std::string src(source);
  auto fail = [&](const std::string& what) { throw IoError(src + ": " + what); };
  const uint64_t avail = std::min<uint64_t>(size, file_size);
  if (file_size < kLengthPrefixBytes) {
    fail("file is " + std::to_string(file_size) +
         " bytes, too short for the 8-byte header length (empty, truncated or not a safetensors file)");
  }
  if (avail < kLengthPrefixBytes) fail("only " + std::to_string(avail) + " header bytes were given");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];  // little-endian, whatever the host
  if (n > file_size - kLengthPrefixBytes) {
    fail("header length " + std::to_string(n) + " exceeds the file size " + std::to_string(file_size) +
         " (truncated or not a safetensors file)");
  }
  if (n > kMaxHeaderBytes) {
    fail("header length " + std::to_string(n) + " exceeds the " + std::to_string(kMaxHeaderBytes) +
         "-byte limit (corrupt or not a safetensors file)");
  }
  if (n == 0) fail("header length is 0 (an empty header is not valid JSON; corrupt file?)");
  if (avail - kLengthPrefixBytes < n) {
    fail("header length " + std::to_string(n) + " but only " + std::to_string(avail - kLengthPrefixBytes) +
         " header bytes were given");
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + kLengthPrefixBytes, n);
  if (const std::optional<size_t> bad = find_invalid_utf8(text)) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", static_cast<unsigned char>(text[*bad]));
    fail("header is not valid UTF-8 (byte " + std::string(hex) + " at header offset " + std::to_string(*bad) + ")");
  }
  const uint64_t data_size = file_size - kLengthPrefixBytes - n;
  HeaderSax sax(source, data_size);
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  Header header = sax.take();
  header.header_length = n;
  header.data_size = data_size;

  // The official reader requires the tensors to tile the data section: sort by offsets (header
  // order breaks ties between empty tensors) and walk a cursor through it.
  std::vector<TensorInfo>& ts = header.tensors;
  std::vector<size_t> order(ts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(ts[a].begin, ts[a].end) < std::pair(ts[b].begin, ts[b].end);
  });
  uint64_t cursor = 0;
  const TensorInfo* prev = nullptr;
  for (size_t i : order) {
    const TensorInfo& t = ts[i];
    if (t.begin < cursor) {
      fail("tensors " + quote(prev->name) + " " + offsets_text(*prev) + " and " + quote(t.name) + " " +
           offsets_text(t) + " overlap");
    }
    if (t.begin > cursor) {
      fail("data bytes [" + std::to_string(cursor) + ", " + std::to_string(t.begin) +
           ") belong to no tensor (gap before " + quote(t.name) + "; the format requires contiguous tensors)");
    }
    cursor = t.end;
    prev = &t;
  }
  if (cursor != data_size) {
    fail("the data section holds " + std::to_string(data_size) + " bytes but the tensors cover only " +
         std::to_string(cursor) + " (trailing bytes belong to no tensor)");
  }
  std::vector<TensorInfo> sorted;
  sorted.reserve(ts.size());
  for (size_t i : order) sorted.push_back(std::move(ts[i]));
  ts = std::move(sorted);
  return header;
}

}  // namespace ds::format
