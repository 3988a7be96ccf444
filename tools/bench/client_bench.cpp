// run_client_workload and its helpers (see client_bench.hpp).
#include "tools/bench/client_bench.hpp"

#include "tools/bench/client_process.hpp"  // process_cpu_seconds
#include "tools/bench/prompt_builder.hpp"
#include "tools/bench/timing.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <deque>
#include <stdexcept>

namespace actorlm::bench {

namespace {

using nlohmann::json;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The fields a server may refuse; each is dropped once a 400 names it. Without min_tokens,
// stop_token_ids or logit_bias a request cannot stop early (sim::early_stop_token): it then asks
// for its own length.
constexpr std::array<const char*, 5> kOptionalFields = {"ignore_eos", "min_tokens", "stream_options",
                                                        "stop_token_ids", "logit_bias"};

struct Sent {
  std::size_t index = 0;   // into the workload
  std::int64_t arrival_ns = 0;  // steady ns: the release time (open loop), 0: the start
};

// What one answer says, read from its events.
struct Answer {
  std::int64_t first_ns = -1, done_ns = -1;
  std::vector<std::int64_t> token_ns;
  std::optional<std::uint32_t> usage_tokens;
  bool error_event = false;
};

std::string chunk_text(const json& chunk) {
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return {};
  const auto& c = (*choices)[0];
  if (auto t = c.find("text"); t != c.end() && t->is_string()) return *t;
  if (auto d = c.find("delta"); d != c.end() && d->is_object())
    if (auto t = d->find("content"); t != d->end() && t->is_string()) return *t;
  return {};
}

Answer read_answer(const LoadResult& r) {
  Answer a;
  for (const auto& e : r.events) {
    if (e.data == "[DONE]") {
      a.done_ns = e.arrival_ns;
      continue;
    }
    const auto chunk = json::parse(e.data, nullptr, false);
    if (chunk.is_discarded()) continue;
    if (chunk.contains("error")) a.error_event = true;
    if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object())
      if (auto n = u->find("completion_tokens"); n != u->end() && n->is_number_unsigned())
        a.usage_tokens = n->get<std::uint32_t>();
    if (chunk_text(chunk).empty()) continue;
    if (a.first_ns < 0) a.first_ns = e.arrival_ns;
    a.token_ns.push_back(e.arrival_ns);
  }
  return a;
}

// The kind a request that did not complete is counted under; empty when it completed.
std::string failure_kind(const LoadResult& r, const Answer& a) {
  if (r.outcome == LoadOutcome::failed) {
    if (r.error.starts_with("connect")) return "connect error";
    if (r.error == "timed out") return "timeout";
    return r.status == 0 ? "no answer" : "stream cut short";
  }
  if (r.status != 200) return "HTTP " + std::to_string(r.status);
  if (a.error_event) return "error event";
  if (a.done_ns < 0) return "no [DONE]";
  if (a.first_ns < 0) return "no tokens";
  return {};
}

// Most intervals [start, end) open at once.
std::size_t peak_overlap(const std::vector<LoadResult>& results) {
  std::vector<std::pair<std::int64_t, int>> edges;
  for (const auto& r : results)
    if (r.start_ns > 0) edges.push_back({r.start_ns, 1}), edges.push_back({r.end_ns, -1});
  std::sort(edges.begin(), edges.end());  // an end sorts before a start at the same time
  std::size_t open = 0, peak = 0;
  for (const auto& [t, d] : edges) {
    open = static_cast<std::size_t>(static_cast<std::int64_t>(open) + d);
    peak = std::max(peak, open);
  }
  return peak;
}

}  // namespace

ServerUrl parse_server_url(const std::string& url) {
  constexpr std::string_view http = "http://";
  if (url.starts_with("https://"))
    throw std::invalid_argument(url + ": https is not supported (the load client speaks plain HTTP/1.1)");
  if (!url.starts_with(http)) throw std::invalid_argument(url + ": expected http://HOST[:PORT][/PATH]");
  const std::string rest = url.substr(http.size());
  const auto slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  ServerUrl out;
  const auto colon = authority.rfind(':');
  out.endpoint.host = authority.substr(0, colon);
  out.endpoint.port = 80;
  if (colon != std::string::npos) {
    const std::string port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(port) == 0 || std::stoul(port) > 65535)
      throw std::invalid_argument(url + ": the port must be 1 to 65535, found \"" + port + "\"");
    out.endpoint.port = static_cast<std::uint16_t>(std::stoul(port));
  }
  if (out.endpoint.host.empty()) throw std::invalid_argument(url + ": no host");
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty() || path == "/") path = "/v1/completions";
  else if (path.ends_with("/v1")) path += "/completions";
  out.target = path;
  const auto v1 = path.rfind("/v1/");
  out.models = (v1 == std::string::npos ? std::string() : path.substr(0, v1)) + "/v1/models";
  return out;
}

std::string first_listed_model(const ServerUrl& server, const std::string& api_key) {
  LoadClient client({server.endpoint});
  LoadRequest get;
  get.method = "GET";
  get.target = server.models;
  get.timeout = std::chrono::seconds(30);
  if (!api_key.empty()) get.headers.push_back({"Authorization", "Bearer " + api_key});
  const auto r = client.run_all({get}).at(0);
  if (r.outcome != LoadOutcome::complete || r.status != 200)
    throw std::runtime_error("GET " + server.models + ": " +
                             (r.status ? "HTTP " + std::to_string(r.status) : r.error) + "; give --model");
  const auto j = json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    throw std::runtime_error("GET " + server.models + " lists no model; give --model");
  return j["data"][0]["id"].get<std::string>();
}

ClientRun run_client_workload(const std::vector<sim::WorkloadRequest>& requests,
                              const std::optional<sim::ClosedLoopArrivals>& closed_loop,
                              PromptBuilder& prompts, const ClientBenchOptions& o) {
  // 1. Prompts first, so that building them costs the run nothing.
  std::vector<std::string> prompt_text;
  prompt_text.reserve(requests.size());
  for (const auto& r : requests) prompt_text.push_back(prompts.build(r.input_tokens));

  // 2. The run: a queue of what to send (retries go to its front), every answer kept.
  std::array<bool, kOptionalFields.size()> send_field;
  send_field.fill(true);
  send_field[0] = send_field[1] = o.ignore_eos;
  std::deque<Sent> queue;
  std::vector<LoadResult> results(requests.size());
  std::vector<std::int64_t> arrival(requests.size(), 0);
  ClientRun out;
  const std::int64_t t0 = now_ns() + 20'000'000;  // 20 ms for the first connects' setup
  for (std::size_t i = 0; i < requests.size(); ++i)
    queue.push_back({i, closed_loop ? 0 : t0 + requests[i].arrival_ns});
  const std::int64_t think_ns = closed_loop ? std::int64_t(closed_loop->think_time_s * 1e9) : 0;
  std::size_t started = 0, done = 0;  // closed loop: the first `clients` go at t0, no think time

  auto body_of = [&](std::size_t i) {
    const sim::WorkloadRequest& w = requests[i];
    const bool early = sim::stops_early(w) && send_field[1] && send_field[3] && send_field[4];
    // --no-ignore-eos: a capped request asks for its cap and ends where the model stops.
    const bool cap = early || (sim::stops_early(w) && !o.ignore_eos);
    json b = {{"prompt", prompt_text[i]},
              {"max_tokens", cap ? sim::requested_max_tokens(w) : w.output_tokens},
              {"stream", true},
              {"temperature", 0}};
    if (!o.model.empty()) b["model"] = o.model;
    if (send_field[0]) b["ignore_eos"] = true;
    if (early) {
      b["min_tokens"] = w.output_tokens - 1;
      b["stop_token_ids"] = {sim::early_stop_token};
      b["logit_bias"] = {{std::to_string(sim::early_stop_token), sim::early_stop_bias}};
    } else if (send_field[1]) {
      b["min_tokens"] = w.output_tokens;
    }
    if (send_field[2]) b["stream_options"] = {{"include_usage", true}};
    return b.dump();
  };
  auto next = [&]() -> std::optional<LoadRequest> {
    if (queue.empty()) return std::nullopt;
    const Sent s = queue.front();
    queue.pop_front();
    LoadRequest req;
    req.target = o.server.target;
    req.body = body_of(s.index);
    req.timeout = o.timeout;
    req.tag = s.index;
    if (!o.api_key.empty()) req.headers.push_back({"Authorization", "Bearer " + o.api_key});
    if (closed_loop) {
      req.release_ns = ++started <= closed_loop->clients ? t0 : now_ns() + think_ns;
    } else {
      req.release_ns = s.arrival_ns;
    }
    arrival[s.index] = req.release_ns;
    return req;
  };
  auto on_result = [&](LoadResult r) {
    const std::size_t i = r.tag;
    if (r.status == 400) {  // a field this server refuses: drop it and send this request again
      for (std::size_t f = 0; f < kOptionalFields.size(); ++f)
        if (send_field[f] && r.body.find(kOptionalFields[f]) != std::string::npos) {
          send_field[f] = false;
          if (o.warn)
            o.warn(std::string("the server refused ") + kOptionalFields[f] + " (HTTP 400); sending without it" +
                   (f < 2 ? ": outputs may end before the asked length (counted as short)"
                    : f > 2 ? ": requests that were to stop early ask for their own length instead of max_tokens"
                            : ""));
          ++out.retried;
          queue.push_front({i, closed_loop ? 0 : now_ns()});
          return;
        }
    }
    results[i] = std::move(r);
    ++done;
    if (o.progress) o.progress(done, requests.size());
  };
  LoadClientOptions lo{o.server.endpoint};
  lo.keep_alive = o.keep_alive;
  LoadClient client(std::move(lo));
  const double cpu0 = process_cpu_seconds();
  const std::uint32_t concurrency =
      closed_loop ? closed_loop->clients
                  : static_cast<std::uint32_t>(std::min<std::size_t>(requests.size(), o.max_connections));
  client.run(std::max<std::uint32_t>(concurrency, 1), next, on_result);
  out.cpu_s = process_cpu_seconds() - cpu0;

  // 3. Answers into the simulator's records, times relative to t0.
  std::int64_t last = t0;
  std::vector<double> lag_us;
  out.requests.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& r = results[i];
    const Answer a = read_answer(r);
    auto& t = out.requests[i];
    t.id = i + 1;
    const std::int64_t arrived = closed_loop ? r.start_ns : arrival[i];
    t.arrival_ns = arrived - t0;
    t.input_tokens = requests[i].input_tokens;
    t.token_ns.reserve(a.token_ns.size());
    for (auto ns : a.token_ns) t.token_ns.push_back(ns - t0);
    for (const auto& e : r.events) lag_us.push_back(double(e.read_ns - e.arrival_ns) / 1e3);
    out.reused += r.reused;
    t.output_tokens = a.usage_tokens.value_or(static_cast<std::uint32_t>(a.token_ns.size()));
    if (a.first_ns >= 0) t.first_token_ns = a.first_ns - t0;
    last = std::max(last, r.end_ns);
    const std::string kind = failure_kind(r, a);
    if (!kind.empty()) {
      ++out.errors[kind];
      continue;
    }
    t.finished_ns = a.done_ns - t0;
    t.completed = true;
    if (t.output_tokens < requests[i].output_tokens) ++out.short_outputs;
    if (t.output_tokens > requests[i].output_tokens) ++out.long_outputs;
  }
  out.wall_s = double(last - t0) / 1e9;
  out.peak_streams = peak_overlap(results);
  out.lag_us_p50 = percentile(lag_us, 50);
  out.lag_us_p99 = percentile(lag_us, 99);
  return out;
}

}  // namespace actorlm::bench
