// The shard protocol's flat wire format (actors/shard/wire_format.hpp): random Steps and
// StepResults come back field for field after encoding and decoding (into fresh objects and into
// ones that held another message), through the functions and through CAF's binary serializer as
// the network sends them (shard_protocol.hpp's inspect()); malformed buffers (truncations, a
// trailing byte, another format's magic, a count larger than the bytes behind it, a CAF length
// prefix past the message's end) are refused without reading outside them or allocating what
// they claim.
#define BOOST_TEST_MODULE wire_format
#include <boost/test/unit_test.hpp>

#include "actors/shard/shard_protocol.hpp"
#include "actors/shard/wire_format.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <cstring>
#include <random>

using namespace actorlm;
using namespace actorlm::shard;

namespace {

struct Gen {
  std::mt19937_64 rng;
  explicit Gen(std::uint64_t seed) : rng(seed) {}
  std::uint64_t u(std::uint64_t n) { return rng() % n; }
  float f() { return std::uniform_real_distribution<float>(-3, 3)(rng); }
  template <class T, class Fn>
  std::vector<T> many(std::uint64_t max, Fn fn) {
    std::vector<T> v(u(max + 1));
    for (auto& x : v) x = fn();
    return v;
  }

  SamplingParams sampling() {
    SamplingParams s;
    s.temperature = f();
    s.top_p = f();
    s.top_k = static_cast<std::int32_t>(u(100)) - 1;
    s.min_p = f();
    s.seed = rng();
    s.logprobs = u(2) == 1;
    s.top_logprobs = static_cast<std::uint32_t>(u(20));
    s.presence_penalty = f();
    s.frequency_penalty = f();
    s.repetition_penalty = f();
    s.logit_bias = many<LogitBias>(4, [&] { return LogitBias{static_cast<kv::TokenId>(u(50000)), f()}; });
    s.prompt_logprobs = static_cast<std::int32_t>(u(4)) - 1;
    s.min_tokens = static_cast<std::uint32_t>(u(10));
    s.min_tokens_stop_ids = many<kv::TokenId>(3, [&] { return static_cast<kv::TokenId>(u(50000)); });
    return s;
  }

  Step step() {
    Step s;
    s.id = rng();
    s.block_size = 1u << u(9);
    s.dropped = many<kv::SeqId>(5, [&] { return kv::SeqId(rng()); });
    s.added = many<NewSeq>(3, [&] {
      NewSeq n;
      n.seq = rng();
      n.request = rng();
      n.sample = static_cast<std::uint32_t>(u(4));
      n.tokens = many<kv::TokenId>(40, [&] { return static_cast<kv::TokenId>(u(50000)); });
      n.prompt_len = static_cast<std::uint32_t>(u(n.tokens.size() + 1));
      n.sampling = sampling();
      return n;
    });
    s.seqs = many<SeqWork>(300, [&] {
      SeqWork w;
      w.seq = rng();
      w.appended = static_cast<kv::TokenId>(u(50000)) - 1;
      w.begin = static_cast<std::uint32_t>(u(5000));
      w.end = w.begin + static_cast<std::uint32_t>(u(600));
      w.table_first = static_cast<std::uint32_t>(u(300));
      w.table_blocks = many<kv::BlockId>(u(4) == 0 ? 40 : 1, [&] { return kv::BlockId(u(1u << 20)); });
      w.num_samples = static_cast<std::uint32_t>(u(3));
      w.padding = u(5) == 0;
      return w;
    });
    s.copies = many<kv::BlockCopy>(4, [&] { return kv::BlockCopy{kv::BlockId(u(999)), kv::BlockId(u(999))}; });
    s.swap_out = many<kv::BlockMove>(4, [&] { return kv::BlockMove{kv::BlockId(u(999)), kv::BlockId(u(999))}; });
    s.swap_in = many<kv::BlockMove>(4, [&] { return kv::BlockMove{kv::BlockId(u(999)), kv::BlockId(u(999))}; });
    return s;
  }

  StepResult result() {
    StepResult r;
    r.step_id = rng();
    r.duration_ns = static_cast<std::int64_t>(rng() >> 1);
    r.host_ns = static_cast<std::int64_t>(rng() >> 2);
    r.tokens = many<SampledToken>(300, [&] {
      SampledToken t{kv::SeqId(rng()), static_cast<kv::TokenId>(u(50000)), f(), {}};
      t.top = many<TopLogprob>(u(3) == 0 ? 5 : 0, [&] { return TopLogprob{static_cast<kv::TokenId>(u(50000)), f()}; });
      return t;
    });
    r.prompt_logprobs = many<PromptLogprob>(u(2) == 0 ? 40 : 0, [&] {
      PromptLogprob t{kv::SeqId(rng()), static_cast<std::uint32_t>(u(4096)), static_cast<kv::TokenId>(u(50000)), f(), {},
                      static_cast<std::uint32_t>(u(50000)) + 1};
      t.top = many<TopLogprob>(u(3) == 0 ? 5 : 0, [&] { return TopLogprob{static_cast<kv::TokenId>(u(50000)), f()}; });
      return t;
    });
    return r;
  }
};

void check_same(const SamplingParams& a, const SamplingParams& b) {
  BOOST_TEST(a.temperature == b.temperature);
  BOOST_TEST(a.top_p == b.top_p);
  BOOST_TEST(a.top_k == b.top_k);
  BOOST_TEST(a.min_p == b.min_p);
  BOOST_TEST(a.seed == b.seed);
  BOOST_TEST(a.logprobs == b.logprobs);
  BOOST_TEST(a.top_logprobs == b.top_logprobs);
  BOOST_TEST(a.presence_penalty == b.presence_penalty);
  BOOST_TEST(a.frequency_penalty == b.frequency_penalty);
  BOOST_TEST(a.repetition_penalty == b.repetition_penalty);
  BOOST_REQUIRE_EQUAL(a.logit_bias.size(), b.logit_bias.size());
  for (std::size_t i = 0; i < a.logit_bias.size(); ++i) {
    BOOST_TEST(a.logit_bias[i].token == b.logit_bias[i].token);
    BOOST_TEST(a.logit_bias[i].bias == b.logit_bias[i].bias);
  }
  BOOST_TEST(a.prompt_logprobs == b.prompt_logprobs);
  BOOST_TEST(a.min_tokens == b.min_tokens);
  BOOST_TEST(a.min_tokens_stop_ids == b.min_tokens_stop_ids);
}

void check_same(const Step& a, const Step& b) {
  BOOST_TEST(a.id == b.id);
  BOOST_TEST(a.block_size == b.block_size);
  BOOST_TEST(a.dropped == b.dropped);
  BOOST_REQUIRE_EQUAL(a.added.size(), b.added.size());
  for (std::size_t i = 0; i < a.added.size(); ++i) {
    BOOST_TEST(a.added[i].seq == b.added[i].seq);
    BOOST_TEST(a.added[i].request == b.added[i].request);
    BOOST_TEST(a.added[i].sample == b.added[i].sample);
    BOOST_TEST(a.added[i].prompt_len == b.added[i].prompt_len);
    BOOST_TEST(a.added[i].tokens == b.added[i].tokens);
    check_same(a.added[i].sampling, b.added[i].sampling);
  }
  BOOST_REQUIRE_EQUAL(a.seqs.size(), b.seqs.size());
  for (std::size_t i = 0; i < a.seqs.size(); ++i) {
    const SeqWork &x = a.seqs[i], &y = b.seqs[i];
    BOOST_TEST(x.seq == y.seq);
    BOOST_TEST(x.appended == y.appended);
    BOOST_TEST(x.begin == y.begin);
    BOOST_TEST(x.end == y.end);
    BOOST_TEST(x.table_first == y.table_first);
    BOOST_TEST(x.table_blocks == y.table_blocks);
    BOOST_TEST(x.num_samples == y.num_samples);
    BOOST_TEST(x.padding == y.padding);
  }
  BOOST_TEST((a.copies == b.copies));
  BOOST_TEST((a.swap_out == b.swap_out));
  BOOST_TEST((a.swap_in == b.swap_in));
}

void check_same(const StepResult& a, const StepResult& b) {
  BOOST_TEST(a.step_id == b.step_id);
  BOOST_TEST(a.duration_ns == b.duration_ns);
  BOOST_TEST(a.host_ns == b.host_ns);
  BOOST_REQUIRE_EQUAL(a.tokens.size(), b.tokens.size());
  for (std::size_t i = 0; i < a.tokens.size(); ++i) {
    BOOST_TEST(a.tokens[i].seq == b.tokens[i].seq);
    BOOST_TEST(a.tokens[i].token == b.tokens[i].token);
    BOOST_TEST(a.tokens[i].logprob == b.tokens[i].logprob);
    BOOST_REQUIRE_EQUAL(a.tokens[i].top.size(), b.tokens[i].top.size());
    for (std::size_t j = 0; j < a.tokens[i].top.size(); ++j) {
      BOOST_TEST(a.tokens[i].top[j].token == b.tokens[i].top[j].token);
      BOOST_TEST(a.tokens[i].top[j].logprob == b.tokens[i].top[j].logprob);
    }
  }
  BOOST_REQUIRE_EQUAL(a.prompt_logprobs.size(), b.prompt_logprobs.size());
  for (std::size_t i = 0; i < a.prompt_logprobs.size(); ++i) {
    const auto &x = a.prompt_logprobs[i], &y = b.prompt_logprobs[i];
    BOOST_TEST(x.seq == y.seq);
    BOOST_TEST(x.position == y.position);
    BOOST_TEST(x.token == y.token);
    BOOST_TEST(x.logprob == y.logprob);
    BOOST_TEST(x.rank == y.rank);
    BOOST_REQUIRE_EQUAL(x.top.size(), y.top.size());
    for (std::size_t j = 0; j < x.top.size(); ++j) {
      BOOST_TEST(x.top[j].token == y.top[j].token);
      BOOST_TEST(x.top[j].logprob == y.top[j].logprob);
    }
  }
}

// Cuts of `bytes` short of its end (every length up to 64, then steps of 1 + n / 64), and one
// byte more, are refused; so is another magic.
template <class T, class Decode>
void malformed_are_refused(const std::vector<char>& bytes, Decode decode) {
  for (std::size_t n = 0; n < bytes.size(); n += 1 + n / 64) {
    T x;
    BOOST_TEST(!decode(std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)), x));
  }
  T x;
  auto longer = bytes;
  longer.push_back(0);
  BOOST_TEST(!decode(longer, x));
  auto other = bytes;
  other[0] ^= 1;
  BOOST_TEST(!decode(other, x));
}

}  // namespace

BOOST_AUTO_TEST_CASE(random_steps_come_back_field_for_field) {
  Gen g(1);
  for (int i = 0; i < 200; ++i) {
    const Step s = g.step();
    std::vector<char> bytes;
    encode_step(s, bytes);
    Step back;
    BOOST_REQUIRE(decode_step(bytes, back));
    check_same(s, back);
  }
}

BOOST_AUTO_TEST_CASE(random_step_results_come_back_field_for_field) {
  Gen g(2);
  for (int i = 0; i < 200; ++i) {
    const StepResult r = g.result();
    std::vector<char> bytes;
    encode_step_result(r, bytes);
    StepResult back;
    BOOST_REQUIRE(decode_step_result(bytes, back));
    check_same(r, back);
  }
}

BOOST_AUTO_TEST_CASE(truncated_padded_or_foreign_buffers_are_refused) {
  Gen g(3);
  for (int i = 0; i < 5; ++i) {
    std::vector<char> bytes;
    encode_step(g.step(), bytes);
    malformed_are_refused<Step>(bytes, decode_step);
    encode_step_result(g.result(), bytes);
    malformed_are_refused<StepResult>(bytes, decode_step_result);
  }
}

BOOST_AUTO_TEST_CASE(a_count_larger_than_the_bytes_behind_it_is_refused) {
  Step s;
  s.seqs.resize(2);
  std::vector<char> bytes;
  encode_step(s, bytes);
  // The seqs' count sits after magic, id, block size, the dropped count and the added count.
  const std::size_t at = 4 + 8 + 4 + 4 + 4;
  const std::uint32_t huge = 0xffffffffu;
  std::memcpy(bytes.data() + at, &huge, 4);
  Step back;
  BOOST_TEST(!decode_step(bytes, back));
}

BOOST_AUTO_TEST_CASE(decoding_into_an_object_that_held_another_message_leaves_nothing_of_it) {
  Gen g(4);
  for (int i = 0; i < 20; ++i) {
    const Step a = g.step();
    Step target = g.step();
    std::vector<char> bytes;
    encode_step(a, bytes);
    BOOST_REQUIRE(decode_step(bytes, target));
    check_same(a, target);
    const StepResult r = g.result();
    StepResult rt = g.result();
    encode_step_result(r, bytes);
    BOOST_REQUIRE(decode_step_result(bytes, rt));
    check_same(r, rt);
  }
}

BOOST_AUTO_TEST_CASE(steps_and_results_cross_cafs_binary_serializer_as_the_network_sends_them) {
  Gen g(5);
  for (int i = 0; i < 50; ++i) {
    const Step s = g.step();
    const StepResult r = g.result();
    std::vector<char> buf;
    caf::binary_serializer sink{nullptr, buf};
    BOOST_REQUIRE(!sink(const_cast<Step&>(s), const_cast<StepResult&>(r)));
    Step s2 = g.step();
    StepResult r2;
    caf::binary_deserializer source{nullptr, buf};
    BOOST_REQUIRE(!source(s2, r2));
    BOOST_TEST(source.remaining() == 0u);
    check_same(s, s2);
    check_same(r, r2);
  }
}

BOOST_AUTO_TEST_CASE(a_caf_length_prefix_past_the_message_is_refused_before_any_allocation) {
  // CAF writes a byte sequence's length as a varint: 0xF0 0xFF 0xFF 0xFF 0x0F claims about
  // 4 GiB; four bytes follow.
  const std::vector<char> buf = {char(0xF0), char(0xFF), char(0xFF), char(0xFF), char(0x0F), 1, 2, 3, 4};
  Step s;
  caf::binary_deserializer source{nullptr, buf};
  BOOST_TEST(static_cast<bool>(source(s)));
  StepResult r;
  caf::binary_deserializer source2{nullptr, buf};
  BOOST_TEST(static_cast<bool>(source2(r)));
  // A sane length whose bytes are not a Step: the format's own check refuses it.
  std::vector<char> junk;
  caf::binary_serializer sink{nullptr, junk};
  std::vector<char> payload(40, 7);
  BOOST_REQUIRE(!sink(payload));
  caf::binary_deserializer source3{nullptr, junk};
  BOOST_TEST(static_cast<bool>(source3(s)));
}
