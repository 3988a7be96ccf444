#pragma once
// One completion call (POST /v1/completions or /v1/chat/completions) being answered on a
// connection. It submits the session's engine requests through its I/O thread's bridge, turns
// the engine's batches into SSE chunks (one flush per batch) or gathers them into one JSON
// body, and aborts what still runs when the client leaves. A non-streamed answer is written
// only at the end, so that a failed call can still be an HTTP 500; a streamed one that fails
// gets an error event, then [DONE]. Runs on its connection's I/O thread only.

#include "actors/http/completion_session.hpp"
#include "actors/http/connection.hpp"
#include "actors/http/openai_response.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>

namespace actorlm::http {

// An API error as an HTTP answer (JSON in OpenAI's shape; Retry-After on 429 and 503).
Response error_response(const ApiError&);

// A client's X-Request-Id that names a response (and goes into the access log): 1 to
// kMaxClientRequestId visible ASCII characters, so a UUID, a trace id or a tool's own
// scheme, and nothing that could break a log line.
inline constexpr std::size_t kMaxClientRequestId = 256;
bool valid_client_request_id(std::string_view);

// What a call needs from the server it runs in.
struct CallHost {
  EngineBridge& bridge;
  std::atomic<std::size_t>& in_flight;
  // The access log and the status counters: once per call, with the HTTP status it ended with
  // (499: the client left).
  std::function<void(const std::string& id, int status, const CompletionSession&, SteadyClock::time_point t0)> log;
};

class ApiCall final : public Listener, public std::enable_shared_from_this<ApiCall> {
 public:
  // `session` has been prepared (CompletionSession::prepare gave no error).
  ApiCall(CallHost&, std::shared_ptr<Connection>, std::unique_ptr<CompletionSession>, ResponseMeta,
          SteadyClock::time_point t0);
  ~ApiCall() override;
  ApiCall(const ApiCall&) = delete;
  ApiCall& operator=(const ApiCall&) = delete;

  void start();
  void deliver(ChannelBatch&&) override;

 private:
  void on_submitted(SubmitOutcome);
  void process(const ChannelBatch&);
  // What went wrong inside the server (an exception): the call fails as the engine's failures do.
  void fail_internal(const std::string& what);
  void stream_deltas(const std::vector<ChoiceDelta>&);
  void gather_deltas(const std::vector<ChoiceDelta>&);
  void finish();
  void refuse(const ApiError&);
  void abandon();         // the connection closed first
  void end(int status);   // once: forget the engine requests, log, leave in_flight
  // The answer's X-Request-Id: the client's, or else the first engine request's id.
  std::string request_id_header() const;

  CallHost& host_;
  std::shared_ptr<Connection> conn_;
  std::unique_ptr<CompletionSession> session_;
  ResponseMeta meta_;
  StreamChunks chunks_;                   // streamed calls: the chunks' constant members, rendered once
  std::string event_;                     // one SSE event (reused: no allocation per token)
  SteadyClock::time_point t0_;
  bool submitted_ = false, ended_ = false;
  ChannelBatch early_;                    // events that came before the engine's answer
  std::vector<bool> opened_;              // chat streams: choice's role chunk sent
  std::vector<ChoiceResult> results_;     // non-streamed answer, per choice
};

}  // namespace actorlm::http
