// ds::inference::TextStream: one sequence's output tokens turned into text as they come, the way a
// stop string needs it: each token is decoded with all before it (a tokenizer's text of a token
// depends on its neighbours), an unfinished UTF-8 character at the end waits for the next token,
// and the text goes through a StopMatcher, so a stop string is found at the token that completes
// it and the text is cut just before it. Pipeline::generate_text and ds-serve's ChoiceStream use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/text_codec.h"
#include "inference/stop_matcher.h"

namespace ds::inference {

class TextStream {
 public:
  // `codec` must outlive the stream.
  TextStream(const data::TextCodec& codec, std::vector<std::string> stops);

  // One more output token; returns the text that is now safe to hand out ("" once stopped: later
  // tokens are ignored).
  std::string push(int64_t id);
  // Generation ended (not by a stop string): the held-back rest, an unfinished character as U+FFFD.
  std::string finish();

  bool stopped() const { return stop_.stopped(); }
  // Tokens taken in: through the one that completed a stop string.
  int64_t num_tokens() const { return static_cast<int64_t>(ids_.size()); }
  const std::vector<int64_t>& ids() const { return ids_; }
  // The decoded text of ids() without an unfinished last character (stop strings not cut).
  const std::string& decoded() const { return stable_; }
  // Bytes of text handed out so far.
  size_t emitted() const { return stop_.emitted(); }

 private:
  const data::TextCodec& codec_;
  StopMatcher stop_;
  std::vector<int64_t> ids_;
  std::string stable_;
  size_t fed_ = 0;  // bytes of stable_ given to stop_
};

}  // namespace ds::inference
