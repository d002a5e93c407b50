// Protocol-buffer wire format for the Event subset: varints, fixed 32/64-bit little-endian
// scalars, length-delimited strings and sub-messages (https://protobuf.dev/programming-guides/encoding/).
#include "profiling/tf_event.h"

#include <cstring>

#include "util/error.h"

namespace ds {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (uint64_t{field} << 3) | type); }
void put_fixed(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}
void put_bytes(std::string& out, uint32_t field, std::string_view s) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, s.size());
  out.append(s);
}

// A cursor over one message's bytes; every read checks bounds.
class WireReader {
 public:
  WireReader(std::string_view b, const std::string& origin) : b_(b), origin_(origin) {}
  bool done() const { return at_ >= b_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const auto byte = static_cast<unsigned char>(b_[at_++]);
      v |= uint64_t{byte & 0x7Fu} << shift;
      if (!(byte & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  uint64_t fixed(int bytes) {
    need(static_cast<size_t>(bytes));
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(b_[at_++])} << (8 * i);
    return v;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    need(n);
    const std::string_view s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  void skip(uint32_t type) {
    switch (type) {
      case kVarint: varint(); break;
      case kFixed64: fixed(8); break;
      case kLengthDelimited: bytes(); break;
      case kFixed32: fixed(4); break;
      default: fail("unsupported wire type " + std::to_string(type));
    }
  }
  void expect(uint32_t got, uint32_t want, const char* field) {
    if (got != want) fail(std::string("field ") + field + " has wire type " + std::to_string(got));
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw IoError(origin_ + ": malformed Event record (" + what + ")");
  }

 private:
  void need(uint64_t n) const {
    if (n > b_.size() - at_) fail("truncated");
  }
  std::string_view b_;
  const std::string& origin_;
  size_t at_ = 0;
};

TfScalar decode_value(std::string_view bytes, const std::string& origin, bool& has_simple) {
  WireReader r(bytes, origin);
  TfScalar v;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = static_cast<uint32_t>(key >> 3), type = static_cast<uint32_t>(key & 7);
    if (field == 1) {
      r.expect(type, kLengthDelimited, "Value.tag");
      v.tag = std::string(r.bytes());
    } else if (field == 2) {
      r.expect(type, kFixed32, "Value.simple_value");
      const auto bits = static_cast<uint32_t>(r.fixed(4));
      std::memcpy(&v.simple_value, &bits, 4);
      has_simple = true;
    } else {
      r.skip(type);
    }
  }
  return v;
}

}  // namespace

std::string encode_tf_event(const TfEvent& event) {
  std::string out;
  if (event.wall_time != 0.0) {
    uint64_t bits;
    std::memcpy(&bits, &event.wall_time, 8);
    put_key(out, 1, kFixed64);
    put_fixed(out, bits, 8);
  }
  if (event.step != 0) {
    put_key(out, 2, kVarint);
    put_varint(out, static_cast<uint64_t>(event.step));  // negative int64: ten bytes, as protobuf does
  }
  if (!event.file_version.empty()) put_bytes(out, 3, event.file_version);
  if (event.has_summary || !event.values.empty()) {
    std::string summary;
    for (const TfScalar& v : event.values) {
      std::string value;
      if (!v.tag.empty()) put_bytes(value, 1, v.tag);
      uint32_t bits;
      std::memcpy(&bits, &v.simple_value, 4);
      put_key(value, 2, kFixed32);
      put_fixed(value, bits, 4);
      put_bytes(summary, 1, value);
    }
    put_bytes(out, 5, summary);
  }
  return out;
}

TfEvent decode_tf_event(std::string_view bytes, const std::string& origin) {
  WireReader r(bytes, origin);
  TfEvent e;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = static_cast<uint32_t>(key >> 3), type = static_cast<uint32_t>(key & 7);
    if (field == 1) {
      r.expect(type, kFixed64, "Event.wall_time");
      const uint64_t bits = r.fixed(8);
      std::memcpy(&e.wall_time, &bits, 8);
    } else if (field == 2) {
      r.expect(type, kVarint, "Event.step");
      e.step = static_cast<int64_t>(r.varint());
    } else if (field == 3) {
      r.expect(type, kLengthDelimited, "Event.file_version");
      e.file_version = std::string(r.bytes());
    } else if (field == 5) {
      r.expect(type, kLengthDelimited, "Event.summary");
      e.has_summary = true;
      WireReader s(r.bytes(), origin);
      while (!s.done()) {
        const uint64_t skey = s.varint();
        if ((skey >> 3) != 1) {
          s.skip(static_cast<uint32_t>(skey & 7));
          continue;
        }
        s.expect(static_cast<uint32_t>(skey & 7), kLengthDelimited, "Summary.value");
        bool has_simple = false;
        TfScalar v = decode_value(s.bytes(), origin, has_simple);
        if (has_simple) e.values.push_back(std::move(v));  // images, histograms, tensors: skipped
      }
    } else {
      r.skip(type);
    }
  }
  return e;
}

}  // namespace ds
