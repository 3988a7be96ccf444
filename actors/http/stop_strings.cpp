#include "actors/http/stop_strings.hpp"

#include <algorithm>

namespace actorlm::http {

std::string StopMatcher::push(std::string_view text, bool armed) {
  if (stopped_) return {};
  if (stops_.empty()) return std::string(text);
  held_ += text;
  if (!armed) unarmed_ = held_.size();
  // The stop string that completes first wins (ties: the longer one), so the result does not
  // depend on how the text was cut into tokens. Only matches that end past unarmed_ count.
  std::size_t first = std::string::npos, first_end = std::string::npos;
  for (const auto& s : stops_) {
    const std::size_t from = unarmed_ >= s.size() ? unarmed_ - s.size() + 1 : 0;
    if (const auto at = held_.find(s, from); at != std::string::npos)
      if (at + s.size() < first_end || (at + s.size() == first_end && at < first)) {
        first = at;
        first_end = at + s.size();
      }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, include_ ? first_end : first);
    held_.clear();
    return out;
  }
  // Hold the longest suffix that is a prefix of some stop string.
  std::size_t keep = 0;
  for (const auto& s : stops_)
    for (std::size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
  const std::size_t released = held_.size() - keep;
  std::string out = held_.substr(0, released);
  held_.erase(0, released);
  unarmed_ -= std::min(unarmed_, released);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  unarmed_ = 0;
  return stopped_ ? std::string() : out;
}

}  // namespace actorlm::http
