#include "actors/http/stop_strings.hpp"

namespace actorlm::http {

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  if (stops_.empty()) return std::string(text);
  held_ += text;
  // The stop string that completes first wins (ties: the longer one), so the result does not
  // depend on how the text was cut into tokens.
  std::size_t first = std::string::npos, first_end = std::string::npos;
  for (const auto& s : stops_)
    if (const auto at = held_.find(s); at != std::string::npos)
      if (at + s.size() < first_end || (at + s.size() == first_end && at < first)) {
        first = at;
        first_end = at + s.size();
      }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
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
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return stopped_ ? std::string() : out;
}

}  // namespace actorlm::http
