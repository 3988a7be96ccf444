// The cluster's parts in one process: the fingerprint a worker compares, the placement of ranks
// on workers, and the rendezvous store over the actors, through which ranks of the cpu
// backend's Gloo group find each other (here threads of one process; across processes in
// cluster_processes_test).
#define BOOST_TEST_MODULE cluster_parts
#include "actors/cluster/fingerprint.hpp"
#include "actors/cluster/rendezvous_store.hpp"
#include "kernels/cpu/collective.hpp"

#include <boost/test/unit_test.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <future>
#include <random>
#include <thread>

using namespace actorlm;

BOOST_AUTO_TEST_CASE(equal_fingerprints_agree_and_a_difference_names_the_key_and_both_sides) {
  config::Config head, worker;
  BOOST_TEST(cluster::compare(cluster::fingerprint(head, "m.gguf (10 bytes)"), "H",
                              cluster::fingerprint(worker, "m.gguf (10 bytes)"), "W").empty());
  worker.cache.dtype = config::CacheDtype::f32;
  const auto diff = cluster::compare(cluster::fingerprint(head, "m.gguf (10 bytes)"), "H",
                                     cluster::fingerprint(worker, "other.gguf (11 bytes)"), "W");
  BOOST_TEST(diff.find("cache.dtype is \"f16\" on the head (H) but \"f32\" on the worker (W)") != std::string::npos, diff);
  BOOST_TEST(diff.find("\"m.gguf (10 bytes)\" on the head (H) but \"other.gguf (11 bytes)\"") != std::string::npos, diff);
  // Keys that only the head's scheduler uses do not count.
  worker = head;
  worker.scheduler.max_num_seqs = 3;
  worker.engine.batching = config::Batching::continuous;
  BOOST_TEST(cluster::compare(cluster::fingerprint(head, ""), "H", cluster::fingerprint(worker, ""), "W").empty());
}

BOOST_AUTO_TEST_CASE(default_placement_gives_every_worker_a_contiguous_even_share_of_the_ranks) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const std::int64_t tp = std::uniform_int_distribution<std::int64_t>(1, 64)(rng);
    const std::size_t n = std::uniform_int_distribution<std::size_t>(1, std::size_t(tp))(rng);
    config::ClusterConfig c;
    for (std::size_t i = 0; i < n; ++i) c.workers.push_back("127.0.0.1:" + std::to_string(7000 + i));
    const auto where = config::worker_of_rank(c, tp);
    BOOST_REQUIRE(where.size() == std::size_t(tp));
    BOOST_TEST(std::is_sorted(where.begin(), where.end()), "contiguous, tp " << tp << " over " << n);
    std::vector<std::int64_t> count(n, 0);
    for (auto w : where) ++count.at(w);
    const auto [lo, hi] = std::minmax_element(count.begin(), count.end());
    BOOST_TEST(*lo >= 1, "every worker hosts a rank: tp " << tp << " over " << n);
    BOOST_TEST(*hi - *lo <= 1, "even: tp " << tp << " over " << n);
  }
  config::ClusterConfig c;
  c.workers = {"a:1", "b:2"};
  c.placement = {1, 0, 1};
  BOOST_TEST((config::worker_of_rank(c, 3) == std::vector<std::uint32_t>{1, 0, 1}));
  BOOST_TEST(config::worker_of_rank(config::ClusterConfig{}, 4).empty());
}

BOOST_AUTO_TEST_CASE(host_port_split_and_loopback_hosts) {
  std::string host;
  std::uint16_t port = 0;
  BOOST_TEST(config::split_host_port("[::1]:7001", host, port));
  BOOST_TEST(host == "::1");
  BOOST_TEST(port == 7001);
  BOOST_TEST(config::split_host_port("node-2.example:80", host, port));
  BOOST_TEST(host == "node-2.example");
  BOOST_TEST(config::split_host_port("127.0.0.1:0", host, port));  // a listen address: any port
  BOOST_TEST(port == 0);
  BOOST_TEST(!config::split_host_port("node2", host, port));
  BOOST_TEST(!config::split_host_port("node2:70000", host, port));
  BOOST_TEST(!config::split_host_port(":80", host, port));
  for (const char* h : {"127.0.0.1", "127.3.2.1", "localhost", "::1"}) BOOST_TEST(config::is_loopback_host(h), h);
  for (const char* h : {"10.0.0.2", "0.0.0.0", "node1", "::"}) BOOST_TEST(!config::is_loopback_host(h), h);
}

namespace {

struct System {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  System() {
    cfg.set("scheduler.max-threads", 2);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_rendezvous_store_answers_a_get_once_its_key_is_set_and_times_out_naming_it) {
  System s;
  auto store_actor = cluster::spawn_rendezvous_store(*s.sys);
  auto store = cluster::remote_store(*s.sys, store_actor);
  auto early = std::async(std::launch::async, [&] { return store->get("rank_1", std::chrono::seconds(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  store->set("rank_1", {'a', 'b'});
  BOOST_TEST((early.get() == std::vector<char>{'a', 'b'}));
  BOOST_TEST((store->get("rank_1", std::chrono::milliseconds(10)) == std::vector<char>{'a', 'b'}));
  try {
    store->get("never", std::chrono::milliseconds(50));
    BOOST_FAIL("a missing key was returned");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("'never'") != std::string::npos, e.what());
  }
  caf::anon_send_exit(store_actor, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(gloo_ranks_that_meet_through_the_store_actor_all_reduce_exactly) {
  System s;
  auto store_actor = cluster::spawn_rendezvous_store(*s.sys);
  constexpr int world = 3;
  // One rendezvous object per rank, as if each lived in a process of its own.
  std::vector<std::vector<float>> data(world);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto rv = std::make_shared<kernels::cpu::CollectiveRendezvous>(world, cluster::remote_store(*s.sys, store_actor),
                                                                       "127.0.0.1");
        auto c = kernels::cpu::Collective::join(rv, r, std::chrono::seconds(30));
        data[r] = {float(r), 0.5f, float(10 * r)};
        c->all_reduce_sum(data[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    BOOST_TEST(errors[r].empty(), errors[r]);
    BOOST_TEST((data[r] == std::vector<float>{3.0f, 1.5f, 30.0f}), "rank " << r);
  }
  caf::anon_send_exit(store_actor, caf::exit_reason::user_shutdown);
}
