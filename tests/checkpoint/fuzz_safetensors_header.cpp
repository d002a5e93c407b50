// libFuzzer target for format::parse_header: any bytes must either parse or throw ds::Error;
// anything else (a crash, a sanitizer report, another exception) is a bug. A header that parses
// must also satisfy the format's invariants and survive encode_header → parse_header unchanged.
// Built with -DDS_FUZZ=ON and clang; without them, fuzz_safetensors_replay runs it over
// fuzz_corpus/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "format/safetensors.h"
#include "util/error.h"

namespace {

using ds::format::Header;
using ds::format::TensorInfo;

void require(bool ok) {
  if (!ok) std::abort();  // an invariant broke: libFuzzer saves the input
}

bool same(const TensorInfo& a, const TensorInfo& b) {
  return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.begin == b.begin && a.end == b.end;
}

// Tensors tile the data section in order, and our own encoding of the header reads back the same.
void check_parsed(const Header& h) {
  uint64_t cursor = 0;
  for (const TensorInfo& t : h.tensors) {
    require(t.begin == cursor && t.end >= t.begin);
    require(static_cast<uint64_t>(t.numel()) * ds::format::dtype_size(t.dtype) == t.nbytes());
    cursor = t.end;
  }
  require(cursor == h.data_size);
  const std::vector<std::pair<std::string, std::string>> meta(h.metadata.begin(), h.metadata.end());
  const std::string enc = ds::format::encode_header(h.tensors, meta);
  const Header again = ds::format::parse_header(reinterpret_cast<const uint8_t*>(enc.data()), enc.size(),
                                                    enc.size() + h.data_size, "re-encoded");
  require(again.tensors.size() == h.tensors.size() && again.metadata == h.metadata);
  for (size_t i = 0; i < h.tensors.size(); ++i) require(same(again.tensors[i], h.tensors[i]));
  require(again.header_length % 8 == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ds::format::parse_header;
  try {
    check_parsed(parse_header(data, size, size, "fuzz"));  // the input is the whole file
  } catch (const ds::Error&) {
  }
  // The same header bytes inside a larger (claimed) file: exercises the offset and coverage
  // checks against data sections the input does not hold.
  try {
    check_parsed(parse_header(data, size, static_cast<uint64_t>(size) + 4096, "fuzz"));
  } catch (const ds::Error&) {
  }
  return 0;
}
