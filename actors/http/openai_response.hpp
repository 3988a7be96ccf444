#pragma once
// OpenAI's response bodies: a whole completion (non-streaming), and the chunks of a stream
// (Server-Sent Events data). Text is UTF-8; a token's bytes that are not valid UTF-8 on
// their own (logprobs) are written with U+FFFD, and chat logprobs carry the exact bytes.

#include "actors/http/completion_session.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorlm::http {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::completions;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  std::int64_t created = 0;  // Unix seconds
  std::string model;
  std::string client_request_id;  // the request's X-Request-Id header, if it had one
};

// One choice of a non-streaming response, gathered from its deltas.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  // vLLM's prompt_logprobs of the choice's prompt, when asked: completions give them per
  // choice, chat once for the response (the first choice's).
  const std::vector<PromptTokenScore>* prompt_logprobs = nullptr;
};

std::string completion_json(const ResponseMeta&, const std::vector<ChoiceResult>&, bool logprobs, Usage);
// A stream chunk for one choice's delta. Chat streams open each choice with a chunk whose
// delta carries the role: pass `role_chunk` for it (its text is ignored). The chunk's "usage" is
// the delta's when it has one (stream_options.continuous_usage_stats: the choice's prompt and
// its tokens so far; the role chunk: no tokens yet, as vLLM), else null with include_usage.
std::string chunk_json(const ResponseMeta&, const ChoiceDelta&, bool logprobs, bool include_usage, bool role_chunk = false);
// The last chunk when stream_options.include_usage is set: no choices, the usage.
std::string usage_chunk_json(const ResponseMeta&, Usage);

// The chunks of one streamed call as SSE events, byte for byte "data: " + chunk_json(...) +
// "\n\n", without a JSON tree per token: the members that stay the same for the whole call are
// rendered once, and a chunk without logprobs is written member by member (its text escaped by
// nlohmann unless it is plain printable ASCII). The tree took about a third of an I/O thread's
// user time per token at 256 streams. Chunks with logprobs still go through chunk_json.
class StreamChunks {
 public:
  StreamChunks(ResponseMeta meta, bool include_usage);
  // Appends the event to `out` (nothing else of `out` is touched).
  void append_event(std::string& out, const ChoiceDelta&, bool logprobs, bool role_chunk = false) const;

 private:
  ResponseMeta meta_;
  bool include_usage_ = false;
  std::string tail_;  // ,"created":...,"id":...,"model":...,"object":...
};

}  // namespace actorlm::http
