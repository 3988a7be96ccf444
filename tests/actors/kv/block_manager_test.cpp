// Unit tests of the block pool, the block manager's operations and apply_reservation.
#define BOOST_TEST_MODULE block_manager
#include <boost/test/unit_test.hpp>

#include "actors/kv/block_manager.hpp"
#include "actors/kv/block_manager_batch.hpp"

#include <numeric>
#include <vector>

using namespace actorlm::kv;

namespace {
std::vector<TokenId> iota_tokens(std::size_t n, TokenId first = 0) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

BlockManagerOptions opts(std::uint32_t device, std::uint32_t host = 0, std::uint32_t bs = 4,
                         bool caching = true) {
  BlockManagerOptions o;
  o.num_device_blocks = device;
  o.num_host_blocks = host;
  o.block_size = bs;
  o.watermark = 0.0;
  o.prefix_caching = caching;
  return o;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(pool)

BOOST_AUTO_TEST_CASE(lookup_rejects_a_hash_whose_tokens_differ) {
  BlockPool pool(4, 2);
  BlockId b = pool.allocate();
  std::vector<TokenId> a{1, 2}, other{1, 3};
  BOOST_TEST(pool.register_block(b, 42, 7, a));
  BOOST_TEST(pool.lookup(42, 7, a).value() == b);
  BOOST_TEST(!pool.lookup(42, 7, other).has_value());
  BOOST_TEST(!pool.lookup(42, 8, a).has_value());
}

BOOST_AUTO_TEST_CASE(evicts_the_least_recently_released_cached_block_first) {
  BlockPool pool(2, 1);
  BlockId a = pool.allocate(), b = pool.allocate();
  std::vector<TokenId> t{5};
  pool.register_block(a, 1, 0, t);
  pool.register_block(b, 2, 0, t);
  pool.release(b);
  pool.release(a);
  BOOST_TEST(pool.num_cached() == 2u);
  BOOST_TEST(pool.allocate() == b);  // released first, evicted first
  BOOST_TEST(pool.evictions() == 1u);
  BOOST_TEST(pool.lookup(1, 0, t).has_value());
  BOOST_TEST(!pool.lookup(2, 0, t).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(admission)

BOOST_AUTO_TEST_CASE(allocates_one_block_per_block_size_tokens_rounded_up) {
  BlockManager bm(opts(8));
  auto p = iota_tokens(9);
  BOOST_TEST(bm.allocate(1, p, 9) == 0u);
  BOOST_TEST(bm.block_table(1).size() == 3u);
  auto st = bm.stats();
  BOOST_TEST(st.device_used == 3u);
  BOOST_TEST(st.slots_filled == 9u);
  BOOST_TEST(st.slots_allocated == 12u);
}

BOOST_AUTO_TEST_CASE(keeps_the_watermark_free_at_admission) {
  auto o = opts(10);
  o.watermark = 0.2;  // 2 blocks
  BlockManager bm(o);
  BOOST_TEST(bm.watermark_blocks() == 2u);
  BOOST_TEST(bm.can_allocate(iota_tokens(32), 32));   // 8 blocks + 2 kept = 10
  BOOST_TEST(!bm.can_allocate(iota_tokens(33), 33));  // 9 blocks + 2 > 10
}

BOOST_AUTO_TEST_CASE(refuses_to_commit_an_allocation_that_does_not_fit) {
  BlockManager bm(opts(2));
  BOOST_CHECK_THROW(bm.allocate(1, iota_tokens(9), 9), std::logic_error);
  BOOST_TEST(bm.stats().device_free == 2u);
  BOOST_TEST(!bm.contains(1));
}

BOOST_AUTO_TEST_CASE(reserved_mode_allocates_the_whole_maximum_length_at_admission) {
  auto o = opts(16);
  o.mode = AllocationMode::reserved;
  BlockManager bm(o);
  bm.allocate(1, iota_tokens(5), 32);
  BOOST_TEST(bm.block_table(1).size() == 8u);
  BOOST_TEST(bm.blocks_to_append(1, 27) == 0u);
  BOOST_TEST(bm.stats().utilization() == 5.0 / 32.0);
  BOOST_TEST(bm.stats().prefix_queried_tokens == 0u);  // no prefix caching when reserved
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(growth)

BOOST_AUTO_TEST_CASE(appends_into_the_last_block_then_takes_a_new_one) {
  BlockManager bm(opts(8));
  bm.allocate(1, iota_tokens(3), 3);
  BOOST_TEST(bm.blocks_to_append(1) == 0u);
  BOOST_TEST(!bm.append(1, std::vector<TokenId>{3}).has_value());
  BOOST_TEST(bm.block_table(1).size() == 1u);
  BOOST_TEST(bm.blocks_to_append(1) == 1u);
  bm.append(1, std::vector<TokenId>{4});
  BOOST_TEST(bm.block_table(1).size() == 2u);
  BOOST_TEST(bm.num_tokens(1) == 5u);
  BOOST_TEST(bm.blocks_to_append(1, 8) == 2u);  // slots 6..13 span blocks 1, 2, 3
}

BOOST_AUTO_TEST_CASE(copies_a_shared_last_block_before_writing_into_it) {
  BlockManager bm(opts(8));
  bm.allocate(1, iota_tokens(6), 6);
  bm.fork(1, 2);
  const BlockId shared = bm.block_table(1)[1];
  BOOST_TEST(bm.device_pool().ref_count(shared) == 2u);
  BOOST_TEST(bm.blocks_to_append(2) == 1u);
  auto copy = bm.append(2, std::vector<TokenId>{100});
  BOOST_REQUIRE(copy.has_value());
  BOOST_TEST(copy->src == shared);
  BOOST_TEST(bm.block_table(2)[1] == copy->dst);
  BOOST_TEST(bm.block_table(2)[0] == bm.block_table(1)[0]);  // the full block stays shared
  BOOST_TEST(bm.device_pool().ref_count(shared) == 1u);
  BOOST_TEST(!bm.append(1, std::vector<TokenId>{200}).has_value());  // now sole owner
}

BOOST_AUTO_TEST_CASE(refuses_to_grow_past_the_last_free_block) {
  BlockManager bm(opts(2));
  bm.allocate(1, iota_tokens(8), 8);
  BOOST_TEST(!bm.can_append(1));
  BOOST_CHECK_THROW(bm.append(1, std::vector<TokenId>{8}), std::logic_error);
  BOOST_TEST(bm.num_tokens(1) == 8u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(prefix_caching)

BOOST_AUTO_TEST_CASE(reuses_the_longest_cached_prefix_after_its_owner_is_freed) {
  BlockManager bm(opts(8));
  auto p = iota_tokens(10);
  bm.allocate(1, p, 10);
  bm.mark_computed(1, 10);
  const std::vector<BlockId> first(bm.block_table(1).begin(), bm.block_table(1).end());
  bm.free(1);
  BOOST_TEST(bm.stats().device_cached == 2u);  // two full blocks; the partial one is free
  auto q = iota_tokens(12);
  q[9] = 999;  // differs in the third block only
  BOOST_TEST(bm.allocate(2, q, 12) == 8u);
  BOOST_TEST(bm.block_table(2)[0] == first[0]);
  BOOST_TEST(bm.block_table(2)[1] == first[1]);
  auto st = bm.stats();
  BOOST_TEST(st.prefix_hit_tokens == 8u);
  BOOST_TEST(st.prefix_queried_tokens == 22u);
  BOOST_TEST(st.device_cached == 0u);
}

BOOST_AUTO_TEST_CASE(never_serves_the_block_holding_the_last_prompt_token_from_cache) {
  BlockManager bm(opts(8));
  bm.allocate(1, iota_tokens(8), 8);
  bm.mark_computed(1, 8);
  BOOST_TEST(bm.allocate(2, iota_tokens(8), 8) == 4u);  // block 2 holds token 7: recomputed
  BOOST_TEST(bm.block_table(2)[1] != bm.block_table(1)[1]);
}

BOOST_AUTO_TEST_CASE(registers_blocks_only_once_their_tokens_are_computed) {
  BlockManager bm(opts(8));
  bm.allocate(1, iota_tokens(12), 12);
  bm.mark_computed(1, 5);  // a first prefill chunk covers one full block
  BOOST_TEST(bm.match_prefix(iota_tokens(13)).blocks.size() == 1u);
  bm.mark_computed(1, 12);
  BOOST_TEST(bm.match_prefix(iota_tokens(13)).blocks.size() == 3u);
}

BOOST_AUTO_TEST_CASE(counts_a_revived_cached_block_against_free_space) {
  BlockManager bm(opts(3));
  bm.allocate(1, iota_tokens(8), 8);
  bm.mark_computed(1, 8);
  bm.free(1);
  // 3 blocks available (2 cached + 1 free); a 12-token prompt reuses 2 and needs 1 new.
  BOOST_TEST(bm.can_allocate(iota_tokens(12), 12));
  BOOST_TEST(bm.allocate(2, iota_tokens(12), 12) == 8u);
  BOOST_TEST(bm.stats().device_free == 0u);
}

BOOST_AUTO_TEST_CASE(rejects_a_prefix_match_whose_blocks_were_evicted_since) {
  BlockManager bm(opts(3));
  bm.allocate(1, iota_tokens(8), 8);
  bm.mark_computed(1, 8);
  bm.free(1);
  const auto stale = bm.match_prefix(iota_tokens(9));
  BOOST_TEST(stale.blocks.size() == 2u);
  bm.allocate(2, iota_tokens(12, 500), 12);  // takes all three blocks, evicting both
  bm.free(2);
  BOOST_CHECK_THROW(bm.allocate(3, iota_tokens(9), 9, stale), std::logic_error);
  BOOST_TEST(bm.allocate(3, iota_tokens(9), 9) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fork_free_swap)

BOOST_AUTO_TEST_CASE(fork_shares_every_block_of_the_parent) {
  BlockManager bm(opts(8));
  bm.allocate(1, iota_tokens(7), 7);
  BOOST_TEST(bm.fork(1, 2).empty());
  BOOST_TEST(std::equal(bm.block_table(1).begin(), bm.block_table(1).end(),
                        bm.block_table(2).begin(), bm.block_table(2).end()));
  for (BlockId b : bm.block_table(1)) BOOST_TEST(bm.device_pool().ref_count(b) == 2u);
  BOOST_TEST(bm.stats().device_used == 2u);
}

BOOST_AUTO_TEST_CASE(reserved_fork_copies_the_filled_blocks_into_a_new_reservation) {
  auto o = opts(8);
  o.mode = AllocationMode::reserved;
  BlockManager bm(o);
  bm.allocate(1, iota_tokens(5), 12);  // 3 blocks, 2 filled
  BOOST_TEST(bm.can_fork(1));
  auto copies = bm.fork(1, 2);
  BOOST_TEST(copies.size() == 2u);
  BOOST_TEST(bm.stats().device_used == 6u);
  BOOST_TEST(!bm.can_fork(1));
}

BOOST_AUTO_TEST_CASE(free_returns_every_block_of_the_sequence) {
  BlockManager bm(opts(8, 0, 4, false));
  bm.allocate(1, iota_tokens(13), 13);
  bm.free(1);
  auto st = bm.stats();
  BOOST_TEST(st.device_free == 8u);
  BOOST_TEST(st.num_sequences == 0u);
  BOOST_CHECK_THROW(bm.free(1), std::logic_error);
}

BOOST_AUTO_TEST_CASE(swaps_a_group_out_and_back_moving_shared_blocks_once) {
  BlockManager bm(opts(8, 8));
  bm.allocate(1, iota_tokens(6), 6);
  bm.fork(1, 2);
  bm.append(2, std::vector<TokenId>{50});  // copy-on-write: 3 distinct blocks
  std::vector<SeqId> group{1, 2};
  BOOST_TEST(bm.can_swap_out(group));
  auto out = bm.swap_out(group);
  BOOST_TEST(out.size() == 3u);
  BOOST_TEST(bm.is_swapped(1));
  BOOST_TEST(bm.stats().device_used == 0u);
  BOOST_TEST(bm.stats().host_used == 3u);
  BOOST_TEST(bm.block_table(1)[0] == bm.block_table(2)[0]);  // still shared, on the host
  auto in = bm.swap_in(group);
  BOOST_TEST(in.size() == 3u);
  BOOST_TEST(bm.stats().host_used == 0u);
  BOOST_TEST(bm.stats().device_used == 3u);
  BOOST_TEST(bm.tokens(2).back() == 50);
}

BOOST_AUTO_TEST_CASE(refuses_to_swap_out_without_host_room) {
  BlockManager bm(opts(8, 1));
  bm.allocate(1, iota_tokens(6), 6);
  std::vector<SeqId> group{1};
  BOOST_TEST(!bm.can_swap_out(group));
  BOOST_CHECK_THROW(bm.swap_out(group), std::logic_error);
  BOOST_TEST(!bm.is_swapped(1));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(reservation)

BOOST_AUTO_TEST_CASE(serves_what_fits_in_order_and_names_the_rest) {
  BlockManager bm(opts(4));
  ReserveRequest req;
  req.add_growth(1, true, iota_tokens(8), 8, 8);
  req.add_growth(2, true, iota_tokens(12, 100), 12, 12);  // 3 blocks: only 2 left
  req.add_growth(3, true, iota_tokens(4, 200), 4, 4);
  auto r = apply_reservation(bm, req);
  BOOST_TEST(r.admitted.size() == 2u);
  BOOST_TEST(r.no_room == std::vector<SeqId>{2});
  BOOST_TEST(r.tables.size() == 2u);
  BOOST_TEST(r.tables[0].first == 0u);
  BOOST_TEST(r.tables[0].blocks.size() == 2u);
  BOOST_TEST(r.stats.device_used == 3u);
  BOOST_TEST(!bm.contains(2));
}

BOOST_AUTO_TEST_CASE(an_admission_that_skips_the_prefix_cache_computes_its_whole_prompt_and_queries_nothing) {
  BlockManager bm(opts(8));
  bm.allocate(1, iota_tokens(9), 9);
  bm.mark_computed(1, 9);  // blocks 0 and 1 are cached now
  ReserveRequest req;
  req.add_growth(2, true, iota_tokens(9), 9, 9, false);  // the same prompt, for its prompt logprobs
  auto r = apply_reservation(bm, req);
  BOOST_REQUIRE(r.admitted.size() == 1u);
  BOOST_TEST(r.admitted[0].cached_tokens == 0u);
  BOOST_TEST(r.stats.device_used == 6u);  // its own 3 blocks beside the first sequence's
  const auto before = bm.stats();
  ReserveRequest again;
  again.add_growth(3, true, iota_tokens(9), 9, 9);  // an ordinary admission hits
  BOOST_TEST(apply_reservation(bm, again).admitted.at(0).cached_tokens == 8u);
  const auto after = bm.stats();
  BOOST_TEST(before.prefix_queried_tokens == 9u);  // sequence 1's lookup only
  BOOST_TEST(after.prefix_queried_tokens == 18u);
  BOOST_TEST(after.prefix_hit_tokens == 8u);
}

BOOST_AUTO_TEST_CASE(applies_frees_before_growth_so_their_blocks_serve_the_same_step) {
  BlockManager bm(opts(2));
  bm.allocate(1, iota_tokens(8), 8);
  ReserveRequest req;
  req.free = {1, 99};  // 99 is unknown: ignored
  req.add_growth(2, true, iota_tokens(8, 50), 8, 8);
  auto r = apply_reservation(bm, req);
  BOOST_TEST(r.no_room.empty());
  BOOST_TEST(!bm.contains(1));
  BOOST_TEST(bm.contains(2));
}

BOOST_AUTO_TEST_CASE(reports_the_changed_tail_of_a_table_and_the_copy_on_write) {
  BlockManager bm(opts(8));
  bm.allocate(1, iota_tokens(6), 6);
  ReserveRequest req;
  req.forks.push_back({1, 2});
  req.add_growth(2, false, {77}, 0, 7);
  auto r = apply_reservation(bm, req);
  BOOST_REQUIRE(r.copies.size() == 1u);
  BOOST_REQUIRE(r.tables.size() == 2u);       // the child's full table, then its changed tail
  BOOST_TEST(r.tables[1].first == 1u);
  BOOST_TEST(r.tables[1].blocks == std::vector<BlockId>{r.copies[0].dst});
}

BOOST_AUTO_TEST_SUITE_END()
