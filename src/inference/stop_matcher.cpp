#include "inference/stop_matcher.h"

#include <algorithm>

namespace ds::inference {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return "";
  pending_.append(text);
  // The earliest stop string anywhere in what is not sent yet (earlier text was checked, and only
  // a suffix that begins a stop string was kept, so a match can only involve pending_).
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    std::string out = pending_.substr(0, cut);
    emitted_ += out.size();
    pending_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, out.size());
  emitted_ += out.size();
  return out;
}

std::string StopMatcher::finish() {
  if (stopped_) return "";
  std::string out = std::move(pending_);
  pending_.clear();
  emitted_ += out.size();
  return out;
}

}  // namespace ds::inference
