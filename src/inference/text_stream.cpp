#include "inference/text_stream.h"

#include <string_view>

namespace ds::inference {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD: what a cut character decodes to
}  // namespace

TextStream::TextStream(const data::TextCodec& codec, std::vector<std::string> stops)
    : codec_(codec), stop_(std::move(stops)) {}

std::string TextStream::push(int64_t id) {
  if (stopped()) return "";
  ids_.push_back(id);
  stable_ = codec_.decode(ids_);
  if (stable_.ends_with(kReplacement)) stable_.resize(stable_.size() - kReplacement.size());
  if (stable_.size() <= fed_) return "";
  std::string out = stop_.push(std::string_view(stable_).substr(fed_));
  fed_ = stable_.size();
  return out;
}

std::string TextStream::finish() {
  if (stopped()) return "";
  const std::string text = codec_.decode(ids_);  // the unfinished character, if any, as U+FFFD
  std::string out;
  if (text.size() > fed_) out = stop_.push(std::string_view(text).substr(fed_));
  fed_ = text.size();
  return out + stop_.finish();
}

}  // namespace ds::inference
