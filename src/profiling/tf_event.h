// The part of TensorFlow's Event protocol buffer (tensorboard/compat/proto/event.proto and
// summary.proto) that scalar logging uses, encoded and decoded by hand so no protobuf library is
// needed:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }   (simple_value is in a oneof)
// Encoding follows proto3 as Python's SerializeToString does: fields in number order, zero
// scalars and empty strings omitted, simple_value always present.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds {

struct TfScalar {
  std::string tag;
  float simple_value = 0.0f;
};

struct TfEvent {
  double wall_time = 0.0;  // seconds since the epoch
  int64_t step = 0;
  std::string file_version;      // "brain.Event:2" in a file's first event, else empty
  std::vector<TfScalar> values;  // the summary's simple values (other value kinds are skipped)
  bool has_summary = false;
};

// The Event message's bytes.
std::string encode_tf_event(const TfEvent& event);

// Parses an Event message; unknown fields are skipped, malformed input throws IoError
// mentioning `origin`.
TfEvent decode_tf_event(std::string_view bytes, const std::string& origin);

}  // namespace ds
