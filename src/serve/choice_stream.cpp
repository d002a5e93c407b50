#include "serve/choice_stream.h"

namespace ds::serve {

namespace {

// Code points in UTF-8 text: the bytes that do not continue a character.
int64_t chars(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

ChoiceStream::ChoiceStream(const data::TextCodec& codec, std::vector<std::string> stops, std::string prefix)
    : codec_(codec), text_(codec, std::move(stops)), prefix_(std::move(prefix)), prefix_chars_(chars(prefix_)) {}

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
      const std::string& before = text_.decoded();
      LogprobEntry e{codec_.token_bytes(ids[i]), lp.logprob, {}, prefix_chars_ + chars(before)};
      for (const auto& [tok, v] : lp.top) e.top.emplace_back(codec_.token_bytes(tok), v);
      waiting_.emplace_back(before.size(), std::move(e));
    }
    // One token at a time, so that a stop string is found at the token that completes it.
    out.text += text_.push(ids[i]);
  }
  release(out, false);
  open(out);
  return out;
}

ChoiceDelta ChoiceStream::finish() {
  ChoiceDelta out;
  if (!stopped()) out.text += text_.finish();
  release(out, !stopped());
  open(out);
  return out;
}

void ChoiceStream::release(ChoiceDelta& out, bool all) {
  while (!waiting_.empty() && (all || waiting_.front().first < text_.emitted())) {
    out.logprobs.push_back(std::move(waiting_.front().second));
    waiting_.pop_front();
  }
  if (stopped()) waiting_.clear();  // tokens past the stop string
}

}  // namespace ds::serve
