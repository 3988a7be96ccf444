// All-reduce, broadcast and point-to-point among ranks on threads of this process, on both data
// planes: the in-process kind of rendezvous (process memory) and the kind that spans processes
// (Gloo over loopback TCP, met through a store in memory). Most values are small integers held
// in floats, so every sum is exact and compared with ==; where they are not, the expected sum is
// computed in rank order, which both planes promise.
// Boost.Test is not thread-safe: ranks record what they saw, the main thread checks it.
#define BOOST_TEST_MODULE collective_cpu
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/collective.hpp"
#include "kernels/rendezvous_store.hpp"


#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace actorlm::kernels::cpu;
using namespace std::chrono_literals;
namespace bdata = boost::unit_test::data;

namespace {
constexpr auto kTimeout = 20s;  // generous: the CI machine may be busy; failures come sooner

// The two data planes, by the rendezvous that selects them.
const char* const kLocal = "process memory";
const char* const kGloo = "gloo tcp";
const auto kPlanes = bdata::make({kLocal, kGloo});

// A rendezvous store in memory, for Gloo ranks that are threads of this process.
class MemoryStore : public actorlm::kernels::RendezvousStore {
 public:
  void set(const std::string& key, const std::vector<char>& value) override {
    {
      std::lock_guard lock(mutex_);
      values_[key] = value;
    }
    set_.notify_all();
  }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (!set_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
      throw std::runtime_error("memory store: key '" + key + "' not set in time");
    return values_.at(key);
  }

 private:
  std::mutex mutex_;
  std::condition_variable set_;
  std::map<std::string, std::vector<char>> values_;
};

std::shared_ptr<CollectiveRendezvous> rendezvous_of(const std::string& plane, int size) {
  if (plane == kLocal) return std::make_shared<CollectiveRendezvous>(size);
  return std::make_shared<CollectiveRendezvous>(size, std::make_shared<MemoryStore>(), "127.0.0.1");
}

// Runs body(rank, collective) on one thread per rank after every rank joined; returns what each
// rank threw (null where nothing).
std::vector<std::exception_ptr> run_group(const std::string& plane, int size,
                                          const std::function<void(int, Collective&)>& body,
                                          std::chrono::milliseconds timeout = kTimeout) {
  auto rendezvous = rendezvous_of(plane, size);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank)
    threads.emplace_back([&, rank] {
      try {
        auto c = Collective::join(rendezvous, rank, timeout);
        body(rank, *c);
      } catch (...) {
        errors[std::size_t(rank)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      BOOST_FAIL("rank " << r << " threw: " << e.what());
    }
  }
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return {};
}

// Rank r's i-th value in round `round`: a small integer, different per rank, round and index;
// periodic in i (period 97), so that expected sums of a million elements come from a table.
int value(int rank, int round, std::size_t i) {
  return int((i * 7 + std::size_t(round) * 13 + std::size_t(rank) * 29) % 97) - 40;
}

// [97]: value(rank, round, i) for i = 0..96, or its sum over `size` ranks when rank < 0.
std::vector<float> period(int rank, int round, int size = 0) {
  std::vector<float> t(97, 0.0f);
  for (std::size_t i = 0; i < t.size(); ++i)
    if (rank >= 0)
      t[i] = float(value(rank, round, i));
    else
      for (int r = 0; r < size; ++r) t[i] += float(value(r, round, i));
  return t;
}
}  // namespace

BOOST_DATA_TEST_CASE(all_reduce_sum_gives_every_rank_the_exact_sum, kPlanes * bdata::make({2, 3, 4}), plane, size) {
  // 50 rounds of fresh data; the 4 MiB length in every fifth round only, which keeps the suite
  // within seconds on a busy machine (loopback TCP moves ~2 x 4 MiB per rank per round).
  const std::vector<std::size_t> lengths = {1, 1000, std::size_t(1) << 20};
  constexpr int kRounds = 50;
  std::vector<long> mismatches(static_cast<std::size_t>(size), 0);
  std::vector<int> reported_rank(static_cast<std::size_t>(size), -1),
      reported_size(static_cast<std::size_t>(size), -1);
  const auto errors = run_group(plane, size, [&](int rank, Collective& c) {
    reported_rank[std::size_t(rank)] = c.rank();
    reported_size[std::size_t(rank)] = c.size();
    std::vector<float> data;
    for (int round = 0; round < kRounds; ++round)
      for (std::size_t n : lengths) {
        if (n > 1000 && round % 5 != 0) continue;
        const auto mine = period(rank, round);
        const auto sum = period(-1, round, size);
        data.resize(n);
        for (std::size_t i = 0; i < n; ++i) data[i] = mine[i % 97];
        c.all_reduce_sum(data);
        for (std::size_t i = 0; i < n; ++i)
          if (data[i] != sum[i % 97]) ++mismatches[std::size_t(rank)];
      }
  });
  require_no_errors(errors);
  for (int r = 0; r < size; ++r) {
    BOOST_TEST(mismatches[std::size_t(r)] == 0, "rank " << r);
    BOOST_TEST(reported_rank[std::size_t(r)] == r);
    BOOST_TEST(reported_size[std::size_t(r)] == size);
  }
}

BOOST_DATA_TEST_CASE(broadcast_gives_every_rank_the_roots_data,
                     kPlanes * bdata::make({2, 3, 4}) * bdata::make({0, 1}), plane, size, root) {
  std::vector<long> mismatches(static_cast<std::size_t>(size), 0);
  const auto errors = run_group(plane, size, [&](int rank, Collective& c) {
    for (int round = 0; round < 5; ++round)
      for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(1) << 16}) {
        std::vector<float> f(n);
        std::vector<int32_t> k(n);
        for (std::size_t i = 0; i < n; ++i) {
          f[i] = float(value(rank, round, i));
          k[i] = value(rank, round, i) * 1000003;  // beyond float's exact range
        }
        c.broadcast(std::span<float>(f), root);
        c.broadcast(std::span<int32_t>(k), root);
        for (std::size_t i = 0; i < n; ++i) {
          if (f[i] != float(value(root, round, i))) ++mismatches[std::size_t(rank)];
          if (k[i] != value(root, round, i) * 1000003) ++mismatches[std::size_t(rank)];
        }
      }
  });
  require_no_errors(errors);
  for (int r = 0; r < size; ++r) BOOST_TEST(mismatches[std::size_t(r)] == 0, "rank " << r);
}

BOOST_DATA_TEST_CASE(interleaved_collectives_of_different_lengths_stay_matched, kPlanes, plane) {
  constexpr int kSize = 3;
  std::vector<long> mismatches(kSize, 0);
  const auto errors = run_group(plane, kSize, [&](int rank, Collective& c) {
    for (int round = 0; round < 30; ++round) {
      std::vector<float> a(std::size_t(1 + round * 37));
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(value(rank, round, i));
      c.all_reduce_sum(a);
      std::vector<int32_t> b(std::size_t(1 + round));
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = value(rank, round + 1, i);
      c.broadcast(std::span<int32_t>(b), round % kSize);
      for (std::size_t i = 0; i < a.size(); ++i) {
        int sum = 0;
        for (int r = 0; r < kSize; ++r) sum += value(r, round, i);
        if (a[i] != float(sum)) ++mismatches[std::size_t(rank)];
      }
      for (std::size_t i = 0; i < b.size(); ++i)
        if (b[i] != value(round % kSize, round + 1, i)) ++mismatches[std::size_t(rank)];
    }
  });
  require_no_errors(errors);
  for (int r = 0; r < kSize; ++r) BOOST_TEST(mismatches[std::size_t(r)] == 0, "rank " << r);
}

BOOST_DATA_TEST_CASE(messages_passed_along_a_chain_of_ranks_arrive_whole_between_all_reduces, kPlanes, plane) {
  // A layer split's pattern: rank r receives from r - 1 and sends to r + 1, round after round,
  // lengths changing every round, with an all-reduce of the whole group in between.
  constexpr int kSize = 3;
  std::vector<long> mismatches(kSize, 0);
  const auto errors = run_group(plane, kSize, [&](int rank, Collective& c) {
    for (int round = 0; round < 40; ++round) {
      std::vector<float> hidden(std::size_t(1 + (round * 53) % 5000));
      if (rank == 0)
        for (std::size_t i = 0; i < hidden.size(); ++i) hidden[i] = float(value(0, round, i));
      else
        c.recv(hidden, rank - 1, std::uint32_t(round));
      for (std::size_t i = 0; i < hidden.size(); ++i)
        if (hidden[i] != float(value(0, round, i) + rank)) ++mismatches[std::size_t(rank)];
      for (float& h : hidden) h += 1.0f;  // each stage's own work
      if (rank + 1 < kSize) c.send(hidden, rank + 1, std::uint32_t(round));
      std::vector<float> sum(7, float(rank));
      c.all_reduce_sum(sum);
      if (sum[0] != float(kSize * (kSize - 1) / 2)) ++mismatches[std::size_t(rank)];
    }
  });
  require_no_errors(errors);
  for (int r = 0; r < kSize; ++r) BOOST_TEST(mismatches[std::size_t(r)] == 0, "rank " << r);
}

BOOST_DATA_TEST_CASE(a_send_or_a_receive_times_out_naming_the_rank_when_the_peer_stays_but_never_answers,
                     kPlanes * bdata::make({"recv", "send"}), plane, op) {
  std::atomic<bool> rank1_done = false;
  const auto errors = run_group(
      plane, 2,
      [&](int rank, Collective& c) {
        if (rank == 0) {  // stays in the group (leaving would fail rank 1 at once) and does nothing
          while (!rank1_done) std::this_thread::sleep_for(5ms);
          return;
        }
        struct Done {
          std::atomic<bool>& flag;
          ~Done() { flag = true; }
        } done{rank1_done};
        std::vector<float> data(64);
        if (std::string(op) == "recv") c.recv(data, 0, 7);
        else c.send(data, 0, 7);
      },
      400ms);
  BOOST_TEST(!errors[0]);
  BOOST_TEST_REQUIRE(bool(errors[1]));
  const std::string what = message_of(errors[1]);
  BOOST_TEST(what.find("rank 1 of 2: " + std::string(op) + " of 64 elements failed") != std::string::npos, what);
  if (std::string(plane) == kLocal) BOOST_TEST(what.find("timed out") != std::string::npos, what);
}

BOOST_DATA_TEST_CASE(sending_to_itself_or_outside_the_group_is_refused, kPlanes, plane) {
  std::vector<int> refused(2, 0);
  const auto errors = run_group(plane, 2, [&](int rank, Collective& c) {
    std::vector<float> data(4);
    const auto count = [&](auto&& op) {
      try {
        op();
      } catch (const std::invalid_argument&) {
        ++refused[std::size_t(rank)];
      }
    };
    count([&] { c.send(data, rank, 0); });
    count([&] { c.recv(data, 2, 0); });
    count([&] { c.send(data, -1, 0); });
  });
  require_no_errors(errors);
  BOOST_TEST(refused[0] == 3);
  BOOST_TEST(refused[1] == 3);
}

BOOST_AUTO_TEST_CASE(a_group_of_one_leaves_data_unchanged) {
  auto c = Collective::join(std::make_shared<CollectiveRendezvous>(1), 0, 1s);
  BOOST_TEST(c->rank() == 0);
  BOOST_TEST(c->size() == 1);
  std::vector<float> data = {1.5f, -2, 3};
  const auto before = data;
  c->all_reduce_sum(data);
  c->broadcast(std::span<float>(data), 0);
  BOOST_TEST(data == before);
  BOOST_CHECK_THROW(c->broadcast(std::span<float>(data), 1), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(rejects_ranks_out_of_range_a_second_join_and_an_empty_group) {
  auto rendezvous = std::make_shared<CollectiveRendezvous>(2);
  BOOST_CHECK_THROW(Collective::join(rendezvous, 2, 100ms), std::invalid_argument);
  BOOST_CHECK_THROW(Collective::join(rendezvous, -1, 100ms), std::invalid_argument);
  BOOST_CHECK_THROW(CollectiveRendezvous(0), std::invalid_argument);
  BOOST_CHECK_THROW(Collective::join(nullptr, 0, 100ms), std::invalid_argument);

  auto single = std::make_shared<CollectiveRendezvous>(1);
  auto c = Collective::join(single, 0, 100ms);
  BOOST_CHECK_THROW(Collective::join(single, 0, 100ms), std::invalid_argument);
}

BOOST_DATA_TEST_CASE(join_times_out_naming_the_rank_and_the_ranks_that_never_came, kPlanes, plane) {
  auto rendezvous = rendezvous_of(plane, 3);
  const auto start = std::chrono::steady_clock::now();
  try {
    Collective::join(rendezvous, 0, 300ms);
    BOOST_FAIL("join returned without the other ranks");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("rank 0 of 3") != std::string::npos, what);
    BOOST_TEST(what.find("timed out") != std::string::npos, what);
    BOOST_TEST(what.find("not joined: 1, 2") != std::string::npos, what);
  }
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
}

BOOST_DATA_TEST_CASE(an_operation_times_out_when_a_peer_never_takes_part, kPlanes, plane) {
  std::atomic<bool> rank0_done = false;
  const auto errors = run_group(
      plane, 2,
      [&](int rank, Collective& c) {
        if (rank == 0) {
          std::vector<float> data(100, 1.0f);
          struct Done {
            std::atomic<bool>& flag;
            ~Done() { flag = true; }
          } done{rank0_done};
          c.all_reduce_sum(data);
        } else {
          while (!rank0_done) std::this_thread::sleep_for(5ms);
        }
      },
      400ms);
  BOOST_TEST_REQUIRE(bool(errors[0]));
  const std::string what = message_of(errors[0]);
  BOOST_TEST(what.find("rank 0 of 2") != std::string::npos, what);
  BOOST_TEST(what.find("all_reduce_sum of 100 elements failed") != std::string::npos, what);
  BOOST_TEST(!errors[1]);
}

BOOST_DATA_TEST_CASE(all_reduce_sums_every_element_in_rank_order_on_both_planes,
                     kPlanes * bdata::make({2, 3, 4, 5}), plane, size) {
  // Floats of mixed magnitudes, whose sums depend on the order; lengths shorter than the group
  // (some ranks own no slice), not divisible by it, and over the reduction's chunk.
  const std::vector<std::size_t> lengths = {1, 2, 3, 7, 1000, 4099, (std::size_t(1) << 16) + 3};
  const auto data_of = [&](int rank, std::size_t n) {
    std::mt19937 gen(std::uint32_t(rank * 7919 + n));
    std::normal_distribution<float> mantissa(0.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-12, 12);
    std::vector<float> v(n);
    for (auto& x : v) x = std::ldexp(mantissa(gen), exponent(gen));
    return v;
  };
  // expected[l]: x_0 + x_1 + ... element by element, left to right (0 + x_0 is exact).
  std::vector<std::vector<float>> expected;
  for (std::size_t n : lengths) {
    std::vector<float> sum(n, 0.0f);
    for (int r = 0; r < size; ++r) {
      const auto x = data_of(r, n);
      for (std::size_t i = 0; i < n; ++i) sum[i] += x[i];
    }
    expected.push_back(std::move(sum));
  }
  std::vector<long> mismatches(std::size_t(size), 0);
  const auto errors = run_group(plane, size, [&](int rank, Collective& c) {
    for (std::size_t l = 0; l < lengths.size(); ++l) {
      auto mine = data_of(rank, lengths[l]);
      c.all_reduce_sum(mine);
      if (std::memcmp(mine.data(), expected[l].data(), mine.size() * sizeof(float)) != 0)
        ++mismatches[std::size_t(rank)];
    }
  });
  require_no_errors(errors);
  for (int r = 0; r < size; ++r) BOOST_TEST(mismatches[std::size_t(r)] == 0, "rank " << r);
  // The data can tell orders apart: summed from the last rank down, many sums differ.
  if (size >= 3) {
    long differ = 0;
    const std::size_t n = 4099;
    std::vector<float> backward(n, 0.0f);
    for (int r = size - 1; r >= 0; --r) {
      const auto x = data_of(r, n);
      for (std::size_t i = 0; i < n; ++i) backward[i] += x[i];
    }
    const auto& forward = expected[5];
    for (std::size_t i = 0; i < n; ++i) differ += forward[i] != backward[i];
    BOOST_TEST(differ > long(n / 20), differ << " of " << n);
  }
}

BOOST_DATA_TEST_CASE(ranks_out_of_step_all_fail_instead_of_reading_past_a_buffer,
                     bdata::make({"all_reduce_sum", "broadcast", "mixed"}), op) {
  // Ranks of one process only: Gloo does not check. Rank 2 posts 12 elements where the others
  // post 10, or ("mixed") as many, but in an all-reduce where the others broadcast.
  const std::string kind = op;
  std::vector<std::string> what(3);
  const auto errors = run_group(kLocal, 3, [&](int rank, Collective& c) {
    std::vector<float> data(rank == 2 && kind != "mixed" ? 12 : 10, 1.0f);
    try {
      if (kind == "broadcast" || (kind == "mixed" && rank != 2)) c.broadcast(std::span<float>(data), 0);
      else c.all_reduce_sum(data);
    } catch (const std::runtime_error& e) {
      what[std::size_t(rank)] = e.what();
    }
    std::vector<float> more(4, 1.0f);
    c.all_reduce_sum(more);  // the group is broken now: throws at once
  });
  for (int r = 0; r < 3; ++r) {
    BOOST_TEST(what[std::size_t(r)].find(kind == "mixed" ? "disagree on the operation" : "disagree on the length") !=
                   std::string::npos,
               what[std::size_t(r)]);
    BOOST_TEST_REQUIRE(bool(errors[std::size_t(r)]));
    BOOST_TEST(message_of(errors[std::size_t(r)]).find("unusable") != std::string::npos,
               message_of(errors[std::size_t(r)]));
  }
}

BOOST_DATA_TEST_CASE(an_all_reduce_fails_soon_when_its_peer_has_left_or_leaves_during_it,
                     kPlanes * bdata::make({false, true}), plane, during) {
  std::vector<std::exception_ptr> errors(2);
  auto rendezvous = rendezvous_of(plane, 2);
  std::atomic<bool> rank0_in = false, rank1_gone = false;
  std::thread leaver([&] {
    try {
      auto c = Collective::join(rendezvous, 1, kTimeout);
      if (during) {
        while (!rank0_in) std::this_thread::sleep_for(5ms);
        std::this_thread::sleep_for(100ms);  // rank 0 is inside its all-reduce by now
      }
    } catch (...) {
      errors[1] = std::current_exception();
    }
    rank1_gone = true;  // its Collective is destroyed: connections closed, the group left
  });
  const auto start = std::chrono::steady_clock::now();
  try {
    auto c = Collective::join(rendezvous, 0, kTimeout);
    if (!during)
      while (!rank1_gone) std::this_thread::sleep_for(5ms);
    std::vector<float> data(10, 1.0f);
    rank0_in = true;
    c->all_reduce_sum(data);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  leaver.join();
  BOOST_TEST(!errors[1]);
  BOOST_TEST_REQUIRE(bool(errors[0]));
  const std::string what = message_of(errors[0]);
  BOOST_TEST(what.find("rank 0 of 2: all_reduce_sum") != std::string::npos, what);
  BOOST_TEST((std::chrono::steady_clock::now() - start < 10s), "waited for the whole timeout: " << what);
}

BOOST_AUTO_TEST_CASE(ranks_leaving_right_after_a_collective_never_fail_a_rank_still_waking_from_it) {
  // A rank destroyed as soon as its all-reduce returns breaks the group while the others may not
  // have woken from the last barrier yet; that barrier opened, so they must still succeed.
  long failed = 0;
  for (int group = 0; group < 300; ++group) {
    const auto errors = run_group(kLocal, 3, [&](int rank, Collective& c) {
      std::vector<float> data(5, float(rank));
      c.all_reduce_sum(data);
      if (rank != 0) std::this_thread::yield();
    });
    for (const auto& e : errors) failed += bool(e);
  }
  BOOST_TEST(failed == 0);
}
