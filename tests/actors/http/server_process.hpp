#pragma once
// Test support: the real `actorlm serve` process (or another subcommand) on a free loopback port, and small HTTP
// helpers (cpp-httplib's client; Server-Sent Events split into their data payloads by
// actors/http/sse_parser.hpp).

#include "actors/http/sse_parser.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace actorlm::testing {

using nlohmann::json;

// A child `actorlm` process: `actorlm ARGS... [--config FILE]` with the config text given (the
// default config when empty), started and waited for until a line containing `marker` followed
// by a port; its output (stdout and stderr) keeps being read into log().
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> args, const std::string& marker, const std::string& config_text) {
    if (!config_text.empty()) {
      config_path_ = "/tmp/actorlm-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".toml";
      std::ofstream(config_path_) << config_text;
    }
    // Everything the child needs is built before fork (no allocation between fork and exec).
    args.insert(args.begin(), ACTORLM_BINARY);
    if (!config_path_.empty()) args.insert(args.end(), {"--config", config_path_});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    BOOST_REQUIRE(::pipe(fds) == 0);
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], 2);
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = ::fdopen(fds[0], "r");
    char line[4096];
    while (std::fgets(line, sizeof line, out_)) {
      append_log(line);
      const std::string l = line;
      if (auto at = l.find(marker); at != std::string::npos) {
        port_ = std::stoi(l.substr(at + marker.size()));
        break;
      }
    }
    BOOST_REQUIRE_MESSAGE(port_ > 0, "`actorlm " + args.at(1) + "` did not start:\n" + log());
    reader_ = std::thread([this] {
      char buf[4096];
      while (std::fgets(buf, sizeof buf, out_)) append_log(buf);
    });
  }

  ~ChildProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();
    if (out_) std::fclose(out_);
    if (!config_path_.empty()) std::remove(config_path_.c_str());
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  // Waits for the process to exit; its exit status, or -1 on timeout.
  int wait_exit(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  std::string log() const {
    std::lock_guard lock(mu_);
    return log_;
  }
  // Waits until the log contains `text`; false after `timeout`.
  bool log_reaches(const std::string& text, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  void append_log(const char* s) {
    std::lock_guard lock(mu_);
    log_ += s;
  }
  std::string config_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int port_ = 0;
  FILE* out_ = nullptr;
  std::thread reader_;
  mutable std::mutex mu_;
  std::string log_;
};

// `actorlm serve --config FILE --port 0`, once it listens.
class ServerProcess : public ChildProcess {
 public:
  explicit ServerProcess(const std::string& config_text = "")
      : ChildProcess({"serve", "--port", "0"}, "listening on http://127.0.0.1:", config_text) {}

  httplib::Client client(int timeout_s = 120) const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(timeout_s, 0);
    c.set_write_timeout(timeout_s, 0);
    c.set_connection_timeout(5, 0);
    return c;
  }
};

// The status of a response, 0 when none came (so a failed exchange fails a check, not the test binary).
inline int status_of(const httplib::Result& r) { return r ? r->status : 0; }

inline httplib::Result post_json(httplib::Client& c, const std::string& path, const json& body) {
  return c.Post(path, body.dump(), "application/json");
}

// A streamed response: the data payloads in order ("[DONE]" included) and the raw text.
struct Stream {
  int status = 0;
  std::string request_id;  // the X-Request-Id header
  std::string error;  // the client's error when the exchange failed
  std::string raw;
  std::vector<std::string> data;
  std::vector<json> chunks() const {
    std::vector<json> out;
    for (const auto& d : data)
      if (d != http::sse_done) out.push_back(json::parse(d));
    return out;
  }
};

// POSTs and reads the SSE body; `keep_reading(events so far)` may return false to hang up.
inline Stream post_stream(httplib::Client& c, const std::string& path, const json& body,
                          const std::function<bool(const Stream&)>& keep_reading = {}) {
  Stream s;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  http::SseParser sse;
  req.response_handler = [&](const httplib::Response& r) {
    s.status = r.status;
    s.request_id = r.get_header_value("X-Request-Id");
    return true;
  };
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    s.raw.append(data, n);
    for (auto& payload : sse.feed({data, n})) s.data.push_back(std::move(payload));
    return !keep_reading || keep_reading(s);
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  if (!c.send(req, res, error)) s.error = httplib::to_string(error);
  return s;
}

// Polls the server's /metrics until `pred` holds; false after `timeout`.
inline bool metrics_reach(ServerProcess& s, const std::function<bool(const std::string&)>& pred,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto c = s.client(5);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto m = c.Get("/metrics"); m && pred(m->body)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The value of an unlabelled sample in Prometheus text, or -1 when absent.
inline double metric(const std::string& text, const std::string& name) {
  std::size_t at = 0;
  while ((at = text.find(name + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + name.size() + 1));
    at += name.size();
  }
  return -1;
}

}  // namespace actorlm::testing
