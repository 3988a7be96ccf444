#include "actors/http/api_call.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace actorlm::http {

Response error_response(const ApiError& e) {
  Response res{static_cast<beast_http::status>(e.status), 11};
  res.set(beast_http::field::content_type, "application/json");
  if (e.status == 429 || e.status == 503) res.set(beast_http::field::retry_after, "1");
  res.body() = e.to_json();
  return res;
}

bool valid_client_request_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxClientRequestId) return false;
  return std::all_of(id.begin(), id.end(), [](char ch) { return ch > 0x20 && ch < 0x7f; });
}

ApiCall::ApiCall(CallHost& host, std::shared_ptr<Connection> conn, std::unique_ptr<CompletionSession> session,
                 ResponseMeta meta, SteadyClock::time_point t0)
    : host_(host),
      conn_(std::move(conn)),
      session_(std::move(session)),
      meta_(std::move(meta)),
      chunks_(meta_, session_->request().include_usage),
      t0_(t0) {
  ++host_.in_flight;
}

ApiCall::~ApiCall() {
  if (!ended_) {  // not reached through end(): still undo what end() would
    for (auto id : session_->unfinished()) host_.bridge.abort(id);
    for (auto id : session_->ids()) host_.bridge.forget(id);
    --host_.in_flight;
  }
}

void ApiCall::start() {
  std::weak_ptr<ApiCall> weak = shared_from_this();
  conn_->hold(shared_from_this());
  conn_->on_abandon([weak] {
    if (auto self = weak.lock()) self->abandon();
  });
  host_.bridge.submit(session_->take_specs(), this, [weak](SubmitOutcome o) {
    if (auto self = weak.lock()) self->on_submitted(std::move(o));
  });
}

void ApiCall::on_submitted(SubmitOutcome o) {
  auto keep = shared_from_this();
  if (ended_) return;
  submitted_ = true;
  try {
    if (auto e = session_->on_submitted(o.status, o.reason)) {
      for (std::size_t i = 0; i < o.status.size() && i < session_->ids().size(); ++i)
        if (o.status[i] == scheduler::SubmitStatus::accepted) host_.bridge.abort(session_->ids()[i]);
      return refuse(*e);
    }
    results_.resize(session_->choices());
    opened_.assign(session_->choices(), false);
    if (session_->request().stream)
      conn_->begin_stream(200, "text/event-stream", {{"X-Request-Id", request_id_header()}});
    ChannelBatch early = std::move(early_);
    process(early);
  } catch (const std::exception& e) {
    fail_internal(e.what());
  }
}

void ApiCall::deliver(ChannelBatch&& b) {
  auto keep = shared_from_this();
  if (ended_) return;
  if (!submitted_) {  // another prompt of the call is still being submitted
    early_.tokens.insert(early_.tokens.end(), std::make_move_iterator(b.tokens.begin()),
                         std::make_move_iterator(b.tokens.end()));
    early_.finished.insert(early_.finished.end(), b.finished.begin(), b.finished.end());
    if (!b.error.empty()) early_.error = std::move(b.error);
    if (!b.failure.empty()) early_.failure = std::move(b.failure);
    return;
  }
  try {
    process(b);
  } catch (const std::exception& e) {
    fail_internal(e.what());
  }
}

void ApiCall::fail_internal(const std::string& what) {
  if (ended_) return;
  spdlog::error("{}: internal error: {}", meta_.id, what);
  for (auto id : session_->ids()) host_.bridge.abort(id);  // all: it may have failed before they were tracked
  const ApiError e{500, "internal error: " + what, "server_error", "", "internal_error"};
  if (conn_->streaming()) {  // headers are out: an error event, then the stream ends
    conn_->append("data: " + e.to_json() + "\n\n");
    conn_->append("data: [DONE]\n\n");
    end(500);
    return conn_->end_stream();
  }
  end(500);
  auto res = error_response(e);
  res.set("X-Request-Id", request_id_header());
  conn_->respond(std::move(res));
}

void ApiCall::process(const ChannelBatch& b) {
  if (b.tokens.empty() && b.finished.empty() && b.failure.empty()) return;
  const auto deltas = session_->on_batch(b);
  if (session_->request().stream) stream_deltas(deltas);
  else gather_deltas(deltas);
  for (auto id : session_->take_released()) host_.bridge.abort(id);  // every choice hit a stop string
  if (!session_->failure().empty() || session_->done()) return finish();
  if (session_->request().stream) conn_->flush();
}

void ApiCall::stream_deltas(const std::vector<ChoiceDelta>& deltas) {
  const auto& r = session_->request();
  auto send = [&](const ChoiceDelta& d, bool role_chunk) {
    event_.clear();
    chunks_.append_event(event_, d, r.logprobs, role_chunk);
    conn_->append(event_);
  };
  for (const auto& d : deltas) {
    if (r.endpoint == Endpoint::chat && !opened_[d.index]) {
      opened_[d.index] = true;
      send(d, true);
    }
    send(d, false);
  }
}

void ApiCall::gather_deltas(const std::vector<ChoiceDelta>& deltas) {
  for (const auto& d : deltas) {
    auto& c = results_[d.index];
    c.text += d.text;
    c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finish_reason) c.finish_reason = *d.finish_reason;
  }
}

void ApiCall::finish() {
  const auto& r = session_->request();
  const Usage usage{session_->prompt_tokens(), session_->completion_tokens(), session_->cached_prompt_tokens()};
  const std::string& failure = session_->failure();
  int status = 200;
  if (!failure.empty()) {
    status = 500;
    for (auto id : session_->unfinished()) host_.bridge.abort(id);
    spdlog::error("{}: {}", meta_.id, failure);
  }
  const ApiError error{500, failure, "server_error", "", "engine_failure"};
  if (r.stream) {
    // Headers are out (200): an error is an event of its own, then the stream ends as usual.
    if (status == 200 && r.include_usage) conn_->append("data: " + usage_chunk_json(meta_, usage) + "\n\n");
    if (status != 200) conn_->append("data: " + error.to_json() + "\n\n");
    conn_->append("data: [DONE]\n\n");
    end(status);
    conn_->end_stream();
    return;
  }
  Response res;
  if (status == 200) {
    for (std::size_t i = 0; i < results_.size(); ++i) results_[i].prompt_logprobs = session_->prompt_scores_of_choice(i);
    res.result(beast_http::status::ok);
    res.set(beast_http::field::content_type, "application/json");
    res.body() = completion_json(meta_, results_, r.logprobs, usage);
  } else {
    res = error_response(error);
  }
  res.set("X-Request-Id", request_id_header());
  end(status);
  conn_->respond(std::move(res));
}

std::string ApiCall::request_id_header() const {
  return meta_.client_request_id.empty() ? std::to_string(session_->first_request_id()) : meta_.client_request_id;
}

void ApiCall::refuse(const ApiError& e) {
  end(e.status);
  auto res = error_response(e);
  res.set("X-Request-Id", request_id_header());
  conn_->respond(std::move(res));
}

void ApiCall::abandon() {
  auto keep = shared_from_this();
  if (ended_) return;
  for (auto id : session_->unfinished()) host_.bridge.abort(id);
  end(499);  // the client closed the connection (nginx's convention); nobody reads this
}

void ApiCall::end(int status) {
  if (ended_) return;
  ended_ = true;
  for (auto id : session_->ids()) host_.bridge.forget(id);
  --host_.in_flight;
  host_.log(meta_.id, status, *session_, t0_);
}

}  // namespace actorlm::http
