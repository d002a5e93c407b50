#include "serve/choice_stream.h"

namespace ds::serve {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Code points in UTF-8 text: the bytes that do not continue a character.
int64_t chars(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

ChoiceStream::ChoiceStream(const TextCodec& codec, std::vector<std::string> stops, std::string prefix)
    : codec_(codec), stop_(std::move(stops)), prefix_(std::move(prefix)), prefix_chars_(chars(prefix_)) {}

void ChoiceStream::open(ChoiceDelta& out) {
  if (opened_) return;
  opened_ = true;
  out.text = prefix_ + out.text;
}

ChoiceDelta ChoiceStream::push(const std::vector<int64_t>& ids, const std::vector<inference::TokenLogprob>& logprobs) {
  ChoiceDelta out;
  for (size_t i = 0; i < ids.size() && !stopped(); ++i) {
    if (i < logprobs.size()) {
      const auto& lp = logprobs[i];
      LogprobEntry e{codec_.token_bytes(ids[i]), lp.logprob, {}, prefix_chars_ + chars(stable_)};
      for (const auto& [tok, v] : lp.top) e.top.emplace_back(codec_.token_bytes(tok), v);
      waiting_.emplace_back(stable_.size(), std::move(e));
    }
    ids_.push_back(ids[i]);
    // One token at a time, so that a stop string is found at the token that completes it.
    stable_ = codec_.decode(ids_);
    if (stable_.ends_with(kReplacement)) stable_.resize(stable_.size() - kReplacement.size());
    if (stable_.size() > fed_) {
      out.text += stop_.push(std::string_view(stable_).substr(fed_));
      fed_ = stable_.size();
    }
  }
  release(out, false);
  open(out);
  return out;
}

ChoiceDelta ChoiceStream::finish() {
  ChoiceDelta out;
  if (!stopped()) {
    const std::string text = codec_.decode(ids_);  // the unfinished character, if any, as U+FFFD
    if (text.size() > fed_) out.text += stop_.push(std::string_view(text).substr(fed_));
    fed_ = text.size();
    out.text += stop_.finish();
  }
  release(out, !stopped());
  open(out);
  return out;
}

void ChoiceStream::release(ChoiceDelta& out, bool all) {
  while (!waiting_.empty() && (all || waiting_.front().first < stop_.emitted())) {
    out.logprobs.push_back(std::move(waiting_.front().second));
    waiting_.pop_front();
  }
  if (stopped()) waiting_.clear();  // tokens past the stop string
}

}  // namespace ds::serve
