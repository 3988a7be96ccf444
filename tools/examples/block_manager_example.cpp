// A runnable tour of the block-manager actor's protocol under the normal CAF scheduler:
// admit two requests sharing a system prompt (the second hits the prefix cache), decode a
// step, fork a sample (copy-on-write on its next token), swap a sequence out and back, free.
// Exits 1 if the actor answers anything other than what the comments say.
#include "actors/kv/block_manager_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <cstdio>
#include <numeric>

using namespace actorlm::kv;

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  failures += ok ? 0 : 1;
}

std::vector<TokenId> prompt(TokenId user_first) {
  std::vector<TokenId> p(40);  // a 32-token "system prompt", then 8 tokens of the user's
  std::iota(p.begin(), p.begin() + 32, 1000);
  std::iota(p.begin() + 32, p.end(), user_first);
  return p;
}
}  // namespace

int main() {
  caf::actor_system_config cfg;
  add_block_manager_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  BlockManagerOptions opt;
  opt.num_device_blocks = 64;
  opt.num_host_blocks = 16;
  opt.block_size = 16;
  auto bm = spawn_block_manager(sys, opt);

  auto reserve = [&](const ReserveRequest& req) {
    ReserveReply out;
    self->request(bm, caf::infinite, req)
        .receive([&](ReserveReply& r) { out = std::move(r); },
                 [&](caf::error& e) { std::printf("error: %s\n", sys.render(e).c_str()); ++failures; });
    return out;
  };

  // Step 1: request 1's prompt is computed in full; its two full blocks become cacheable.
  ReserveRequest step1;
  step1.add_growth(1, true, prompt(1), 128, 40);
  auto r1 = reserve(step1);
  expect(r1.admitted.size() == 1 && r1.tables.at(0).blocks.size() == 3, "request 1 admitted with 3 blocks");

  // Step 2: request 2 shares the system prompt: 32 tokens come from the cache.
  ReserveRequest step2;
  step2.add_growth(2, true, prompt(500), 128, 40);
  step2.add_growth(1, false, {7}, 0, 41);  // request 1 decodes a token meanwhile
  auto r2 = reserve(step2);
  expect(r2.admitted.at(0).cached_tokens == 32, "request 2 reuses 32 cached tokens");
  expect(r2.stats.device_used == 4, "4 distinct blocks in use (2 shared)");

  // Step 3: request 1 forks a second sample; the sample's first token copies the shared block.
  ReserveRequest step3;
  step3.forks.push_back({1, 3});
  step3.add_growth(3, false, {8}, 0, 42);
  auto r3 = reserve(step3);
  expect(r3.copies.size() == 1, "the fork's first token triggers one copy-on-write");

  // Step 4: swap request 2 out, then back in.
  ReserveRequest out;
  out.swap_out.push_back({2});
  expect(reserve(out).swap_out.size() == 3, "request 2's 3 blocks move to the host");
  ReserveRequest in;
  in.swap_in.push_back({2});
  expect(reserve(in).swap_in.size() == 3, "and back to the device");

  // Finish everything: every block is free or cached.
  KvStats end;
  self->request(bm, caf::infinite, kv_free_atom::value, std::vector<SeqId>{1, 2, 3})
      .receive([&](KvStats& s) { end = s; }, [&](caf::error&) { ++failures; });
  expect(end.device_used == 0 && end.device_free + end.device_cached == 64, "nothing leaked");
  std::printf("prefix cache: %llu of %llu prompt tokens hit; utilization at the end %.2f\n",
              (unsigned long long)end.prefix_hit_tokens,
              (unsigned long long)end.prefix_queried_tokens, end.utilization());
  self->send_exit(bm, caf::exit_reason::user_shutdown);
  return failures == 0 ? 0 : 1;
}
