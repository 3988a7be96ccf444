#include "actors/cluster/head.hpp"

#include "actors/cluster/rendezvous_store.hpp"
#include "actors/cluster/worker_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/remote_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <thread>

#include <unistd.h>

namespace actorlm::cluster {

namespace {

using Clock = std::chrono::steady_clock;

struct Worker {
  std::string address;  // "host:port" as configured, or "head"
  bool local = false;   // "head": this process
  std::string host;
  std::uint16_t port = 0;
  std::vector<std::uint32_t> ranks;
  worker_actor handle;
};

// How logs and errors name where a rank lives.
std::string label(const Worker& w) { return w.local ? "the head" : "worker " + w.address; }

// One attempt to reach a worker: remote_actor blocks without limit on a host that accepts but
// never answers (a stopped process), so it runs on a thread of its own, abandoned when the limit
// passes (nullopt then).
std::optional<caf::expected<worker_actor>> try_reach(caf::actor_system& sys, const Worker& w, bool tls,
                                                     std::chrono::duration<double> limit) {
  auto task = std::make_shared<std::packaged_task<caf::expected<worker_actor>()>>([&sys, host = w.host, port = w.port, tls] {
    return tls ? caf::openssl::remote_actor<worker_actor>(sys, host, port)
               : sys.middleman().remote_actor<worker_actor>(host, port);
  });
  auto result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return result.get();
}

// Whether a plain TCP connection to the worker opens. CAF's TLS middleman answers
// cannot_connect_to_node both for a refused connection and for a handshake the worker refused at
// once (before the nonblocking session existed); this tells the two apart for the hint.
// Within 2 s: a host that drops packets would otherwise hold the error for the OS's timeout.
bool accepts_tcp(const Worker& w) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  const auto endpoints = boost::asio::ip::tcp::resolver(io).resolve(w.host, std::to_string(w.port), ec);
  if (ec) return false;
  bool connected = false;
  boost::asio::async_connect(socket, endpoints,
                             [&](const boost::system::error_code& e, const auto&) { connected = !e; });
  io.run_for(std::chrono::seconds(2));
  return connected;
}

// The worker's actor, within `limit`. A handshake that outlasts the middleman's connection
// timeout (4 heartbeats: a machine under load, a slow TLS handshake) is tried again while time
// is left; a refused connection or a TLS failure is reported at once.
worker_actor reach(caf::actor_system& sys, const Worker& w, bool tls, std::chrono::duration<double> limit) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(limit);
  for (;;) {
    auto handle = try_reach(sys, w, tls, std::chrono::duration<double>(deadline - Clock::now()));
    if (!handle)
      throw std::runtime_error("worker " + w.address + " did not answer within cluster.connect_timeout_s = " +
                               std::to_string(limit.count()) + " s (a stopped process, or a firewall?)");
    if (*handle) return std::move(**handle);
    const std::string why = sys.render(handle->error());
    if (why.find("connection_timeout") != std::string::npos && Clock::now() + std::chrono::seconds(1) < deadline) {
      spdlog::warn("cluster: the handshake with worker {} timed out ({}); trying again", w.address, why);
      continue;
    }
    std::string hint = " (is `actorlm worker --listen " + w.address + "` running?)";
    const bool refused_after_connect = why.find("handshake") != std::string::npos ||
                                       why.find("disconnect") != std::string::npos ||
                                       (tls && why.find("cannot_connect_to_node") != std::string::npos && accepts_tcp(w));
    if (refused_after_connect)
      hint = tls ? " (a TLS handshake refused: does the worker use TLS with a certificate of this cluster's CA "
                   "(cluster.tls_ca)?)"
                 : " (does the worker require TLS? then set cluster.tls_cert, tls_key and tls_ca here too)";
    throw std::runtime_error("cannot reach worker " + w.address + ": " + why + hint);
  }
}

}  // namespace

std::string head_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return "actorlm (pid " + std::to_string(::getpid()) + ") on " + host;
}

ClusterShards::ClusterShards(caf::actor_system& sys, const config::Config& cfg, const std::string& identity) {
  const auto& c = cfg.cluster;
  const auto world = static_cast<std::uint32_t>(cfg.engine.world_size());
  const auto placement = config::worker_of_rank(c, world);
  std::vector<Worker> workers(c.workers.size());
  for (std::size_t i = 0; i < workers.size(); ++i) {
    workers[i].address = c.workers[i];
    workers[i].local = c.workers[i] == config::head_worker;
    if (!workers[i].local && !config::split_host_port(c.workers[i], workers[i].host, workers[i].port))
      throw std::invalid_argument("cluster.workers[" + std::to_string(i) + "] = \"" + c.workers[i] + "\" is not host:port");
  }
  for (std::uint32_t r = 0; r < world; ++r) workers.at(placement.at(r)).ranks.push_back(r);

  const auto limit = std::chrono::duration<double>(c.connect_timeout_s);
  const std::string me = head_name();
  HeadHello hello{me, {}, fingerprint(cfg, identity)};
  caf::scoped_actor self{sys};
  for (auto& w : workers) {
    if (w.local) {
      WorkerOptions local;
      local.config = cfg;
      local.name = "head (in process)";
      local.data_address = config::head_data_address(c);
      local.identity = identity;
      w.handle = local_.actor = spawn_worker(sys, std::move(local));
    } else {
      w.handle = reach(sys, w, c.tls(), limit);
    }
    hello.worker = w.address;
    WorkerHello answer;
    self->request(w.handle, std::chrono::duration_cast<caf::timespan>(limit), hello_atom::value, hello)
        .receive([&](WorkerHello& a) { answer = std::move(a); },
                 [&](caf::error& e) {
                   throw std::runtime_error(label(w) + " did not answer the hello: " + sys.render(e));
                 });
    if (!answer.refusal.empty()) throw std::runtime_error(answer.refusal);
    if (w.local)
      spdlog::info("cluster: this process (the head) takes ranks [{}], data plane on {}", ranks_text(w.ranks),
                   config::head_data_address(c));
    else
      spdlog::info("cluster: worker {} ({}) takes ranks [{}]: {}; {}", w.address, c.tls() ? "mutual TLS" : "plaintext",
                   ranks_text(w.ranks), answer.description, answer.memory);
  }

  // Every worker loads its ranks at once: their data-plane joins wait for each other.
  store_ = spawn_rendezvous_store(sys);
  const auto t0 = Clock::now();
  std::vector<decltype(self->request(worker_actor{}, caf::timespan{}, host_atom::value, HostRanks{}))> pending;
  shards_.resize(world);
  locations_.resize(world);
  for (auto& w : workers) {
    pending.push_back(self->request(w.handle, std::chrono::duration_cast<caf::timespan>(limit), host_atom::value,
                                    HostRanks{me, w.ranks, world, store_}));
  }
  std::string failure;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    auto& w = workers[i];
    pending[i].receive(
        [&](std::vector<shard::shard_actor>& got) {
          if (got.size() != w.ranks.size()) {
            failure = label(w) + " returned " + std::to_string(got.size()) + " shards for " +
                      std::to_string(w.ranks.size()) + " ranks";
            return;
          }
          for (std::size_t k = 0; k < got.size(); ++k) {
            shards_[w.ranks[k]] = std::move(got[k]);
            locations_[w.ranks[k]] = label(w);
          }
        },
        [&](caf::error& e) {
          if (failure.empty()) failure = label(w) + " could not host ranks [" + ranks_text(w.ranks) + "]: " + sys.render(e);
        });
  }
  if (!failure.empty()) {
    for (const auto& s : shards_)
      if (s) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store_, caf::exit_reason::user_shutdown);
    throw std::runtime_error(failure);
  }
  spdlog::info("cluster: {} rank(s) on {} worker(s) ready in {:.1f} s", world, workers.size(),
               std::chrono::duration<double>(Clock::now() - t0).count());
}

void ClusterShards::LocalWorker::stop() {
  if (actor) caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  actor = nullptr;
}

ClusterShards::~ClusterShards() {
  local_.stop();  // first: its shards stop as its own, not as a lost head's
  if (store_) caf::anon_send_exit(store_, caf::exit_reason::user_shutdown);
}

}  // namespace actorlm::cluster
