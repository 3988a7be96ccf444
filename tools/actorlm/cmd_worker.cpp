// actorlm worker: hosts shard actors for a cluster's head (actorlm serve or generate with
// [cluster] workers) and nothing else. It loads its configuration's backend far enough to say
// what it offers (the weights are loaded when a head asks for its ranks), publishes one worker
// actor on --listen (mutual TLS with the cluster's certificates), serves one head at a time, and
// after a head is gone frees that head's shards and waits for the next. SIGTERM/SIGINT stop it.
#include "actors/cluster/network.hpp"
#include "actors/cluster/worker_actor.hpp"
#include "actors/config/config.hpp"
#include "actors/serving/backend.hpp"
#include "actors/serving/served_model.hpp"
#include "tools/actorlm/commands.hpp"

#include <CLI/CLI.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>

#include <poll.h>
#include <unistd.h>

namespace actorlm::tools {

namespace {

struct WorkerCliOptions {
  std::string listen, config_file, model, data_address;
};

int stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(stop_pipe[1], &b, 1);
}

std::string memory_line(const std::vector<serving::MemoryItem>& items) {
  std::string out;
  for (const auto& m : items) out += fmt::format("{}{} {:.1f} MiB", out.empty() ? "" : ", ", m.what, m.bytes / (1 << 20));
  return "per rank: " + out;
}

int run_worker(const WorkerCliOptions& o) {
  auto cfg = load_config_or_report(o.config_file);
  if (!cfg) return 1;
  if (!o.model.empty()) cfg->model.path = o.model;
  std::string host;
  std::uint16_t port = 0;
  if (!config::split_host_port(o.listen, host, port)) {
    std::cerr << "worker: --listen " << o.listen << ": expected HOST:PORT (PORT 0: any free port)\n";
    return 2;
  }
  const bool loopback = config::is_loopback_host(host);
  if (!cfg->cluster.tls() && !loopback && !cfg->cluster.insecure) {
    std::cerr << "worker: refusing to listen on " << o.listen
              << " without TLS: set cluster.tls_cert, tls_key and tls_ca (tools/cluster/make_certs.sh makes them), "
                 "or cluster.insecure = true to allow plaintext\n";
    return 1;
  }
  const std::string data_address = !o.data_address.empty() ? o.data_address : host;
  if (config::is_unspecified_host(data_address)) {
    std::cerr << "worker: --listen " << o.listen << " names no single address for the data plane: give --data-address\n";
    return 2;
  }
  if (!cfg->cluster.tls() && !loopback)
    spdlog::warn("worker: plaintext on {} (cluster.insecure = true): anyone who reaches this port can drive it", o.listen);

  std::signal(SIGPIPE, SIG_IGN);
  if (::pipe(stop_pipe) != 0) return 1;
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  try {
    caf::actor_system_config sys_cfg;
    serving::configure_actor_system(sys_cfg);
    cluster::configure_network(sys_cfg, cfg->cluster);
    caf::actor_system sys{sys_cfg};
    // What this worker offers, checked now rather than when a head asks.
    const auto offer = serving::load_backend(*cfg, serving::RankHosting::none());
    cluster::WorkerOptions wo;
    wo.config = *cfg;
    wo.name = o.listen;
    wo.data_address = data_address;
    wo.identity = offer.identity;
    wo.description = offer.description;
    wo.memory = memory_line(offer.memory);
    auto worker = cluster::spawn_worker(sys, wo);
    const bool tls = cfg->cluster.tls();
    auto bound = tls ? caf::openssl::publish(worker, port, host.c_str(), true)
                     : sys.middleman().publish(worker, port, host.c_str(), true);
    if (!bound) {
      caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
      std::cerr << "worker: cannot listen on " << o.listen << ": " << sys.render(bound.error()) << '\n';
      return 1;
    }
    const std::string name = host + ":" + std::to_string(*bound);
    // With port 0 the worker actor's own name has the 0; in refusals it uses the address the
    // head reached it at.
    spdlog::info("worker listening on {} ({}; data plane on {}), tensor parallel {} x layer split {}: {}; {}", name,
                 tls ? "mutual TLS, peers need a certificate of cluster.tls_ca" : "plaintext", data_address,
                 cfg->engine.tensor_parallel_degree, cfg->engine.pipeline_parallel_degree, wo.description, wo.memory);
    spdlog::info("waiting for a head (a serve, generate or simulate whose [cluster] workers names {})", name);
    unsigned char sig = 0;
    while (::read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    spdlog::info("{}: stopping", strsignal(sig));
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "worker: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

void add_worker_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<WorkerCliOptions>();
  CLI::App* w = app.add_subcommand(
      "worker", "Host shard actors for a cluster's head (serve, generate or a wall-clock simulate with [cluster] workers): "
                "actorlm worker --listen 10.0.0.2:7001 --config node.toml");
  w->add_option("--listen", o->listen, "HOST:PORT to accept the head on (PORT 0: any free port, logged)")->required();
  w->add_option("--config", o->config_file,
                "TOML config: its [engine], [model], [cache] must match the head's; [cluster] TLS files for this node "
                "(default: the built-in configs/default.toml)");
  w->add_option("--model", o->model, "GGUF file or HF safetensors folder (overrides model.path)");
  w->add_option("--data-address", o->data_address,
                "Address the ranks here accept the other ranks' data-plane connections on (default: the --listen host)");
  w->callback([o, &exit_code] { exit_code = run_worker(*o); });
}

}  // namespace actorlm::tools
