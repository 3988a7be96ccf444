// The block-manager actor under CAF's deterministic test coordinator.
#define BOOST_TEST_MODULE block_manager_actor
#include <boost/test/unit_test.hpp>

#define CAF_TEST_NO_MAIN
#define FAIL(msg) BOOST_FAIL(msg)
#include <caf/test/dsl.hpp>
#include <caf/test/unit_test_impl.hpp>

#include "actors/kv/block_manager_actor.hpp"

#include <numeric>

using namespace actorlm::kv;

namespace {

struct NetworkConfig : caf::actor_system_config {
  NetworkConfig() { add_block_manager_types(*this); }
};

BlockManagerOptions small_cache() {
  BlockManagerOptions o;
  o.num_device_blocks = 8;
  o.num_host_blocks = 8;
  o.block_size = 4;
  o.watermark = 0.0;
  return o;
}

std::vector<TokenId> tokens(std::size_t n, TokenId first = 0) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

struct Fixture : test_coordinator_fixture<NetworkConfig> {
  block_manager_actor bm = spawn_block_manager(sys, small_cache());
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(block_manager_actor_suite, Fixture)

BOOST_AUTO_TEST_CASE(serves_one_step_reservation_with_tables_and_stats) {
  ReserveRequest req;
  req.add_growth(1, true, tokens(6), 10, 6);
  req.add_growth(2, true, tokens(6, 50), 10, 6);
  auto reply = request<ReserveReply>(bm, req);
  BOOST_TEST(reply.admitted.size() == 2u);
  BOOST_TEST(reply.tables.size() == 2u);
  BOOST_TEST(reply.no_room.empty());
  BOOST_TEST(reply.stats.device_used == 4u);
  BOOST_TEST(reply.stats.num_sequences == 2u);
}

BOOST_AUTO_TEST_CASE(answers_no_room_and_keeps_serving_after_frees) {
  ReserveRequest big;
  big.add_growth(1, true, tokens(30), 30, 30);  // 8 blocks: all of them
  BOOST_TEST(request<ReserveReply>(bm, big).admitted.size() == 1u);
  ReserveRequest more;
  more.add_growth(2, true, tokens(3), 3, 3);
  more.add_growth(1, false, {30, 31, 32}, 0, 33);  // needs a 9th block
  auto r = request<ReserveReply>(bm, more);
  BOOST_TEST((r.no_room == std::vector<SeqId>{2, 1}));
  auto stats = request<KvStats>(bm, kv_free_atom::value, std::vector<SeqId>{1});
  BOOST_TEST(stats.device_used == 0u);
  more.grow.pop_back();  // sequence 1 is gone
  BOOST_TEST(request<ReserveReply>(bm, more).no_room.empty());
}

BOOST_AUTO_TEST_CASE(swaps_out_and_in_within_reservations) {
  ReserveRequest admit;
  admit.add_growth(1, true, tokens(9), 9, 9);
  request<ReserveReply>(bm, admit);
  ReserveRequest out;
  out.swap_out.push_back({1});
  auto r = request<ReserveReply>(bm, out);
  BOOST_TEST(r.swap_out.size() == 3u);
  BOOST_TEST(r.stats.host_used == 3u);
  ReserveRequest in;
  in.swap_in.push_back({1});
  in.add_growth(1, false, {9}, 0, 10);
  r = request<ReserveReply>(bm, in);
  BOOST_TEST(r.swap_in.size() == 3u);
  BOOST_TEST(r.stats.host_used == 0u);
  BOOST_TEST(r.tables.front().blocks.size() == 3u);
}

BOOST_AUTO_TEST_CASE(forks_outside_a_step_sharing_the_parents_blocks) {
  ReserveRequest admit;
  admit.add_growth(1, true, tokens(6), 6, 6);
  request<ReserveReply>(bm, admit);
  auto r = request<ReserveReply>(bm, kv_fork_atom::value, SeqId{1}, SeqId{2});
  BOOST_REQUIRE(r.tables.size() == 1u);
  BOOST_TEST(r.tables[0].seq == 2u);
  BOOST_TEST(r.tables[0].blocks.size() == 2u);
  BOOST_TEST(r.stats.device_used == 2u);  // shared, not copied
  BOOST_TEST(r.stats.num_sequences == 2u);
}

BOOST_AUTO_TEST_CASE(abort_frees_known_sequences_and_ignores_unknown_ones) {
  ReserveRequest admit;
  admit.add_growth(7, true, tokens(5), 5, 5);
  request<ReserveReply>(bm, admit);
  auto freed = request<std::vector<SeqId>>(bm, kv_abort_atom::value, std::vector<SeqId>{7, 8});
  BOOST_TEST(freed == std::vector<SeqId>{7});
  BOOST_TEST(request<KvStats>(bm, kv_stats_atom::value).device_used == 0u);
}

BOOST_AUTO_TEST_CASE(replies_an_error_to_a_protocol_violation_and_stays_alive) {
  ReserveRequest bad;
  bad.add_growth(42, false, {1}, 0, 1);  // growth of a sequence never admitted
  bool got_error = false;
  auto pending = self->request(bm, caf::infinite, bad);
  run();  // the test coordinator runs the actor only when asked
  pending.receive([&](const ReserveReply&) {},
                  [&](caf::error& err) {
                    got_error = true;
                    BOOST_TEST(sys.render(err).find("unknown sequence 42") != std::string::npos);
                  });
  BOOST_TEST(got_error);
  BOOST_TEST(request<KvStats>(bm, kv_stats_atom::value).device_total == 8u);
}

BOOST_AUTO_TEST_CASE(messages_survive_serialization_for_the_network) {
  ReserveRequest req;
  req.swap_out.push_back({3, 4});
  req.forks.push_back({3, 5});
  req.add_growth(9, true, tokens(3), 12, 3);
  auto back = roundtrip(req);
  BOOST_TEST(back.swap_out == req.swap_out);
  BOOST_TEST(back.forks.at(0).child == 5u);
  BOOST_TEST(back.tokens == req.tokens);
  BOOST_TEST((back.tokens_of(back.grow.at(0)).size() == 3u));
  BOOST_TEST(back.grow.at(0).num_tokens == 3u);
  BOOST_TEST(back.grow.at(0).max_total_tokens == 12u);
  ReserveReply rep;
  rep.tables.push_back({9, 1, {4, 5}});
  rep.copies.push_back({1, 2});
  rep.stats.device_total = 77;
  auto rep2 = roundtrip(rep);
  BOOST_TEST(rep2.tables.at(0).blocks == rep.tables.at(0).blocks);
  BOOST_CHECK(rep2.copies == rep.copies);
  BOOST_CHECK(rep2.stats == rep.stats);
}

BOOST_AUTO_TEST_CASE(rejects_invalid_options_before_spawning) {
  auto o = small_cache();
  o.watermark = 1.5;
  BOOST_CHECK_THROW(spawn_block_manager(sys, o), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
