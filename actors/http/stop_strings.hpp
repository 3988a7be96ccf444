#pragma once
// Stop strings matched on generated text across token boundaries. Text that could still turn
// into a stop string is held back; once one matches, the text before it is released and the
// sample stops (the stop string itself is not part of the output, as in OpenAI's API, unless
// include_stop_str_in_output, vLLM's extension). With overlapping stop strings, the one that
// completes first in the text wins.

#include <string>
#include <string_view>
#include <vector>

namespace actorlm::http {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop_str_in_output = false)
      : stops_(std::move(stops)), include_(include_stop_str_in_output) {}
  // Appends generated text; returns the text that can be emitted now. `armed` false: no stop
  // string may end in this text (vLLM's min_tokens: the text of the first min_tokens tokens is
  // not searched; a stop string that starts there and ends later still counts).
  std::string push(std::string_view text, bool armed = true);
  // At the end of the sample: whatever was held back.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  bool include_ = false;
  std::string held_;
  std::size_t unarmed_ = 0;  // held_[0, unarmed_) came while disarmed: no match ends there
  bool stopped_ = false;
};

}  // namespace actorlm::http
