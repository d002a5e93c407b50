// ds::serve::ChoiceStream: one choice of a response, from the tokens the engine produced to what
// is sent: text that never splits a UTF-8 character, cut before the first `stop` string (matched on
// the text: inference::TextStream), optionally opened by the prompt (echo), and the logprob entry
// of every token whose text begins within what was sent. A streamed response sends each delta; a
// whole one concatenates them.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "data/text_codec.h"
#include "inference/sampling.h"
#include "inference/text_stream.h"

namespace ds::serve {

struct LogprobEntry {
  std::string token;  // the token's bytes (a byte of a multi-byte character on its own is possible)
  double logprob = 0.0;
  std::vector<std::pair<std::string, double>> top;  // alternatives, best first
  int64_t text_offset = 0;  // characters (code points) of the choice's text before this token, echo included
};

struct ChoiceDelta {
  std::string text;
  std::vector<LogprobEntry> logprobs;
};

class ChoiceStream {
 public:
  // `prefix`: text sent before the generated text (the prompt, for echo).
  ChoiceStream(const data::TextCodec& codec, std::vector<std::string> stops, std::string prefix = "");

  // New tokens of the choice and, when it asked for them, their logprobs (one per token).
  ChoiceDelta push(const std::vector<int64_t>& ids, const std::vector<inference::TokenLogprob>& logprobs);
  // Generation ended (not by a stop string): the held-back rest.
  ChoiceDelta finish();

  // A stop string matched: the choice is complete (finish_reason "stop"); later tokens are ignored.
  bool stopped() const { return text_.stopped(); }
  // Tokens taken in up to the end (through the one that completed a stop string).
  int64_t num_tokens() const { return text_.num_tokens(); }

 private:
  void release(ChoiceDelta& out, bool all);
  void open(ChoiceDelta& out);

  const data::TextCodec& codec_;
  inference::TextStream text_;
  std::string prefix_;
  int64_t prefix_chars_ = 0;
  bool opened_ = false;
  // Logprob entries not sent yet, with the byte offset in text_.decoded() where their token's
  // text begins.
  std::deque<std::pair<size_t, LogprobEntry>> waiting_;
};

}  // namespace ds::serve
