#pragma once
// The client side of the Server-Sent Events that HttpServer writes: an incremental parser of a
// `text/event-stream` body, fed the bytes as they arrive, whatever the split between reads.
// Plain C++ and header-only, so test clients and tools/bench share it without linking the server.
//
// Follows the WHATWG "event stream interpretation": lines end in CRLF, LF or CR; a blank line
// ends an event; a line starting with ':' is a comment; "data" lines (one optional space after
// the colon) are joined with '\n'; an event without data is not dispatched. The other fields
// (event, id, retry) are skipped: OpenAI streams use data only, ending with `data: [DONE]`.

#include <string>
#include <string_view>
#include <vector>

namespace actorlm::http {

// The data payload that ends an OpenAI stream.
inline constexpr std::string_view sse_done = "[DONE]";

class SseParser {
 public:
  // Consumes the next bytes of the body; returns the data payloads of the events they complete,
  // in order ("[DONE]" included). An event whose blank line has not arrived yet is kept.
  std::vector<std::string> feed(std::string_view bytes) {
    std::vector<std::string> events;
    while (!bytes.empty()) {
      if (after_cr_) {  // a CRLF split across reads: its LF ends nothing more
        after_cr_ = false;
        if (bytes.front() == '\n') {
          bytes.remove_prefix(1);
          continue;
        }
      }
      const auto end = bytes.find_first_of("\r\n");
      if (end == std::string_view::npos) {
        line_.append(bytes);
        break;
      }
      line_.append(bytes.substr(0, end));
      after_cr_ = bytes[end] == '\r';
      bytes.remove_prefix(end + 1);
      end_line(events);
    }
    return events;
  }

 private:
  void end_line(std::vector<std::string>& events) {
    if (line_.empty()) {  // the blank line that dispatches the event
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
      return;
    }
    const std::string_view line = line_;
    if (line.front() != ':') {
      const auto colon = line.find(':');
      std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (line.substr(0, colon) == "data") {
        if (has_data_) data_ += '\n';
        data_.append(value);
        has_data_ = true;
      }
    }
    line_.clear();
  }

  std::string line_;       // the current line, without its ending
  std::string data_;       // the current event's data lines so far
  bool has_data_ = false;  // "data:" with an empty value still dispatches an empty payload
  bool after_cr_ = false;  // the last byte fed was a CR
};

}  // namespace actorlm::http
