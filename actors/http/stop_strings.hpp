#pragma once
// Stop strings matched on generated text across token boundaries. Text that could still turn
// into a stop string is held back; once one matches, the text before it is released and the
// sample stops (the stop string itself is not part of the output, as in OpenAI's API). With
// overlapping stop strings, the one that completes first in the text wins.

#include <string>
#include <string_view>
#include <vector>

namespace actorlm::http {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends generated text; returns the text that can be emitted now.
  std::string push(std::string_view text);
  // At the end of the sample: whatever was held back.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace actorlm::http
