// Property tests: long random sequences of allocate / append / fork / free / swap / prefix
// reuse, checked after every operation against invariants and against a model of the KV
// memory in which each slot holds the token id written there.
#define BOOST_TEST_MODULE block_manager_properties
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "actors/kv/block_manager.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

using namespace actorlm::kv;
namespace bdata = boost::unit_test::data;

namespace {

constexpr std::uint32_t bs = 4;
constexpr TokenId empty_slot = -1;

// The memory the shards would hold, as token ids, and the operations a shard applies.
struct KvMemory {
  std::vector<TokenId> device, host;  // [num_blocks, block_size]
  KvMemory(std::uint32_t d, std::uint32_t h) : device(d * bs, empty_slot), host(h * bs, empty_slot) {}
  static void copy_block(const std::vector<TokenId>& from, BlockId s, std::vector<TokenId>& to,
                         BlockId d) {
    std::copy_n(from.begin() + s * bs, bs, to.begin() + d * bs);
  }
};

// How often each interesting path ran: the tests require each to have run, so a change that
// makes the random workload miss a path (no swaps, no hits...) fails instead of passing vacuously.
struct Coverage {
  int admits = 0, prefix_hits = 0, copies_on_write = 0, forks = 0, swaps_out = 0, swaps_in = 0;
};

class Harness {
 public:
  Harness(std::uint64_t seed, AllocationMode mode, bool caching)
      : rng_(seed), bm_(make_options(mode, caching)), mem_(48, 24) {}

  Coverage run(int steps) {
    for (int i = 0; i < steps; ++i) {
      step();
      check_invariants();
    }
    for (auto& [id, toks] : expected_) bm_.free(id);
    expected_.clear();
    check_invariants();
    const auto st = bm_.stats();
    BOOST_TEST(st.device_used == 0u);
    BOOST_TEST(st.host_used == 0u);
    BOOST_TEST(st.device_free + st.device_cached == st.device_total);
    return cov_;
  }

 private:
  static BlockManagerOptions make_options(AllocationMode mode, bool caching) {
    BlockManagerOptions o;
    o.num_device_blocks = 48;
    o.num_host_blocks = 24;
    o.block_size = bs;
    o.watermark = 0.05;
    o.prefix_caching = caching;
    o.mode = mode;
    return o;
  }

  std::uint32_t uniform(std::uint32_t lo, std::uint32_t hi) {
    return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng_);
  }

  std::vector<SeqId> live(bool swapped) const {
    std::vector<SeqId> out;
    for (auto& [id, t] : expected_)
      if (bm_.is_swapped(id) == swapped) out.push_back(id);
    return out;
  }

  SeqId pick(const std::vector<SeqId>& v) { return v[uniform(0, std::uint32_t(v.size() - 1))]; }

  void write(SeqId id, std::size_t from) {
    auto table = bm_.block_table(id);
    const auto& toks = expected_[id];
    for (std::size_t p = from; p < toks.size(); ++p)
      mem_.device[table[p / bs] * bs + p % bs] = toks[p];
  }

  std::vector<TokenId> random_prompt() {
    // Three shared "system prompts" make prefix hits and partial matches common.
    static const std::vector<TokenId> prefixes[3] = {
        {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {1, 2, 3, 4, 50, 51, 52, 53}, {7, 7, 7, 7, 7}};
    std::vector<TokenId> p;
    if (uniform(0, 3) > 0) {
      const auto& pre = prefixes[uniform(0, 2)];
      p.assign(pre.begin(), pre.begin() + uniform(0, std::uint32_t(pre.size())));
    }
    const std::uint32_t extra = uniform(p.empty() ? 1 : 0, 9);
    for (std::uint32_t i = 0; i < extra; ++i) p.push_back(TokenId(uniform(0, 20)));
    return p;
  }

  void step() {
    const std::uint32_t op = uniform(0, 99);
    auto on_device = live(false);
    auto on_host = live(true);
    if (op < 20 || expected_.empty()) {
      auto prompt = random_prompt();
      const std::uint32_t max_total = std::uint32_t(prompt.size()) + uniform(0, 12);
      auto m = bm_.match_prefix(prompt);
      if (!bm_.can_allocate(prompt, max_total, m)) return;
      const SeqId id = next_id_++;
      expected_[id] = prompt;
      const std::uint32_t cached = bm_.allocate(id, prompt, max_total, m);
      ++cov_.admits;
      cov_.prefix_hits += cached > 0;
      BOOST_TEST(cached % bs == 0u);
      BOOST_TEST(cached < prompt.size());
      write(id, cached);  // the cached part must already be in memory: checked by read-back
      if (uniform(0, 1)) bm_.mark_computed(id, uniform(0, std::uint32_t(prompt.size())));
    } else if (op < 65 && !on_device.empty()) {
      const SeqId id = pick(on_device);
      const std::uint32_t n = uniform(1, 3);
      if (!bm_.can_append(id, n)) return;
      std::vector<TokenId> toks;
      for (std::uint32_t i = 0; i < n; ++i) toks.push_back(TokenId(uniform(0, 20)));
      if (auto copy = bm_.append(id, toks)) {
        ++cov_.copies_on_write;
        KvMemory::copy_block(mem_.device, copy->src, mem_.device, copy->dst);
      }
      const std::size_t from = expected_[id].size();
      expected_[id].insert(expected_[id].end(), toks.begin(), toks.end());
      write(id, from);
      bm_.mark_computed(id, bm_.num_tokens(id));
    } else if (op < 73 && !on_device.empty()) {
      const SeqId parent = pick(on_device);
      if (!bm_.can_fork(parent)) return;
      const SeqId child = next_id_++;
      ++cov_.forks;
      for (auto c : bm_.fork(parent, child)) KvMemory::copy_block(mem_.device, c.src, mem_.device, c.dst);
      expected_[child] = expected_[parent];
    } else if (op < 85 && !expected_.empty()) {
      std::vector<SeqId> all;
      for (auto& [id, t] : expected_) all.push_back(id);
      const SeqId id = pick(all);
      bm_.free(id);
      expected_.erase(id);
    } else if (op < 93 && !on_device.empty()) {
      auto group = family(pick(on_device), on_device);
      if (!bm_.can_swap_out(group)) return;
      ++cov_.swaps_out;
      for (auto m : bm_.swap_out(group)) KvMemory::copy_block(mem_.device, m.src, mem_.host, m.dst);
    } else if (!on_host.empty()) {
      auto group = family(pick(on_host), on_host);
      if (!bm_.can_swap_in(group)) return;
      ++cov_.swaps_in;
      for (auto m : bm_.swap_in(group)) KvMemory::copy_block(mem_.host, m.src, mem_.device, m.dst);
    }
  }

  // A random subset of `candidates` that contains `id` (groups may or may not share blocks).
  std::vector<SeqId> family(SeqId id, const std::vector<SeqId>& candidates) {
    std::vector<SeqId> g{id};
    for (SeqId c : candidates)
      if (c != id && uniform(0, 3) == 0) g.push_back(c);
    return g;
  }

  void check_invariants() {
    std::map<BlockId, std::uint32_t> device_refs, host_refs;
    std::map<BlockId, std::uint32_t> filled;  // distinct device block -> slots holding tokens
    for (auto& [id, toks] : expected_) {
      BOOST_REQUIRE(bm_.contains(id));
      auto got = bm_.tokens(id);
      BOOST_REQUIRE(std::equal(got.begin(), got.end(), toks.begin(), toks.end()));
      const bool swapped = bm_.is_swapped(id);
      auto table = bm_.block_table(id);
      BOOST_REQUIRE(table.size() * bs >= toks.size());
      std::set<BlockId> distinct(table.begin(), table.end());
      BOOST_REQUIRE(distinct.size() == table.size());
      const auto& memory = swapped ? mem_.host : mem_.device;
      for (std::size_t p = 0; p < toks.size(); ++p)
        BOOST_REQUIRE_MESSAGE(memory[table[p / bs] * bs + p % bs] == toks[p],
                              "sequence " << id << " reads a wrong token at position " << p);
      for (std::size_t i = 0; i < table.size(); ++i) {
        (swapped ? host_refs : device_refs)[table[i]]++;
        if (swapped) continue;
        const auto in_block = std::uint32_t(std::clamp<std::int64_t>(
            std::int64_t(toks.size()) - std::int64_t(i * bs), 0, bs));
        auto [it, fresh] = filled.try_emplace(table[i], in_block);
        BOOST_REQUIRE(it->second == in_block);  // holders of a block agree on its fill
      }
    }
    const auto& dev = bm_.device_pool();
    const auto& host = bm_.host_pool();
    for (BlockId b = 0; b < dev.num_blocks(); ++b)
      BOOST_REQUIRE(dev.ref_count(b) == (device_refs.contains(b) ? device_refs[b] : 0u));
    for (BlockId b = 0; b < host.num_blocks(); ++b)
      BOOST_REQUIRE(host.ref_count(b) == (host_refs.contains(b) ? host_refs[b] : 0u));
    const auto st = bm_.stats();
    BOOST_REQUIRE(st.device_free + st.device_used + st.device_cached == st.device_total);
    BOOST_REQUIRE(st.device_used == device_refs.size());
    BOOST_REQUIRE(st.host_used == host_refs.size());
    std::uint64_t slots = 0;
    for (auto& [b, n] : filled) slots += n;
    BOOST_REQUIRE(st.slots_filled == slots);
    BOOST_REQUIRE(st.num_sequences == expected_.size());
  }

  std::mt19937_64 rng_;
  BlockManager bm_;
  KvMemory mem_;
  std::map<SeqId, std::vector<TokenId>> expected_;
  SeqId next_id_ = 1;
  Coverage cov_;
};

}  // namespace

BOOST_DATA_TEST_CASE(paged_with_prefix_caching_keeps_every_invariant, bdata::xrange(1, 41), seed) {
  const auto cov = Harness(seed, AllocationMode::paged, true).run(600);
  BOOST_TEST(cov.prefix_hits > 0);
  BOOST_TEST(cov.copies_on_write > 0);
  BOOST_TEST(cov.swaps_out > 0);
  BOOST_TEST(cov.swaps_in > 0);
}

BOOST_DATA_TEST_CASE(paged_without_prefix_caching_keeps_every_invariant, bdata::xrange(1, 21), seed) {
  const auto cov = Harness(seed, AllocationMode::paged, false).run(600);
  BOOST_TEST(cov.prefix_hits == 0);
  BOOST_TEST(cov.copies_on_write > 0);
  BOOST_TEST(cov.swaps_in > 0);
}

BOOST_DATA_TEST_CASE(reserved_mode_keeps_every_invariant, bdata::xrange(1, 21), seed) {
  const auto cov = Harness(seed, AllocationMode::reserved, false).run(600);
  BOOST_TEST(cov.forks > 0);
  BOOST_TEST(cov.copies_on_write == 0);  // reserved sequences never share a block
  BOOST_TEST(cov.swaps_in > 0);
}
