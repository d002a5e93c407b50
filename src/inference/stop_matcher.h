// ds::inference::StopMatcher: stop strings (OpenAI's `stop`), matched on the decoded text of a
// sequence, not on its tokens, so a stop string may span tokens or end inside one. Text goes in as
// it is decoded; what comes out is safe to send: text that could still turn out to be the start of
// a stop string is held back until the next text settles it. At a match the text ends just before
// the stop string, and nothing more comes out.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ds::inference {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends decoded text; returns the part that can be sent now ("" once stopped).
  std::string push(std::string_view text);
  // Generation ended without a stop string: the held-back rest.
  std::string finish();

  bool stopped() const { return stopped_; }
  size_t held() const { return pending_.size(); }
  size_t emitted() const { return emitted_; }  // bytes handed out so far

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // received, not yet sent: a suffix that some stop string starts with
  size_t emitted_ = 0;
  bool stopped_ = false;
};

}  // namespace ds::inference
