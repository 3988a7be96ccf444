// kernels/cpu/thread_pool.hpp: every index runs exactly once, ranges follow the documented split,
// and the pool survives many tasks in a row (the pattern of a forward: hundreds per step).
#define BOOST_TEST_MODULE thread_pool
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "kernels/cpu/thread_pool.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using actorlm::kernels::cpu::ThreadPool;

BOOST_DATA_TEST_CASE(every_index_runs_exactly_once, boost::unit_test::data::make({1, 2, 3, 5}), threads) {
  ThreadPool pool(threads);
  BOOST_TEST(pool.size() == threads);
  for (std::int32_t chunks : {1, 3, 4})
    for (std::int64_t n : {0, 1, 7, 16, 100, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, 4, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
      }, chunks);
      for (std::int64_t i = 0; i < n; ++i)
        BOOST_TEST(hits[static_cast<std::size_t>(i)].load() == 1, "chunks " << chunks << " n " << n << " i " << i);
    }
}

// The caller owns ranges 0-3 of 8; it stalls in range 0 until the other seven have run, which
// the worker can only do by taking the caller's ranges 1-3 too. (A pool without stealing would
// wait here for ever: the stall gives up after 10 s and the count shows it.)
BOOST_AUTO_TEST_CASE(a_stalled_thread_s_remaining_ranges_are_taken_by_the_others) {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  pool.parallel_for(8, 1, [&](std::int64_t b, std::int64_t) {
    if (b == 0) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (done.load() < 7 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    }
    ++done;
  }, 4);
  BOOST_TEST(done.load() == 8);
}

BOOST_AUTO_TEST_CASE(ranges_are_whole_grains_and_cover_the_work_in_order) {
  for (std::int32_t threads : {1, 2, 3, 4}) {
    std::int64_t expect = 0;
    for (std::int32_t t = 0; t < threads; ++t) {
      std::int64_t b = 0, e = 0;
      ThreadPool::split(1000, 16, threads, t, b, e);
      BOOST_TEST(b == expect);
      BOOST_TEST(b % 16 == 0);
      if (t + 1 < threads) BOOST_TEST(e % 16 == 0);
      expect = e;
    }
    BOOST_TEST(expect == 1000);
  }
}

BOOST_AUTO_TEST_CASE(many_tasks_in_a_row_all_complete) {
  ThreadPool pool(2);
  std::atomic<std::int64_t> sum{0};
  for (int task = 0; task < 20000; ++task)
    pool.parallel_for(64, 8, [&](std::int64_t b, std::int64_t e) { sum += e - b; });
  BOOST_TEST(sum.load() == 20000 * 64);
}

// A layer split's stage: a few tasks, then rest() while the other stages run; the sleeping
// workers must wake for the next task, whether it comes at once or after they went to sleep.
BOOST_DATA_TEST_CASE(workers_put_to_rest_wake_for_the_next_task, boost::unit_test::data::make({2, 3}), threads) {
  ThreadPool pool(threads);
  std::atomic<std::int64_t> sum{0};
  std::atomic<int> by_workers{0};
  const auto caller = std::this_thread::get_id();
  for (int step = 0; step < 600; ++step) {
    for (int task = 0; task < 3; ++task)
      pool.parallel_for(64, 1, [&](std::int64_t b, std::int64_t e) {
        if (std::this_thread::get_id() != caller) ++by_workers;
        if (b == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));  // the workers take a share
        sum += e - b;
      });
    pool.rest();
    if (step % 3 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  BOOST_TEST(sum.load() == 600 * 3 * 64);
  BOOST_TEST(by_workers.load() > 0);  // the workers ran ranges, not only the caller
}

// With a spin that never ends on its own, only rest() can put the workers to sleep: they stay
// awake without it, and all sleep soon after it.
BOOST_AUTO_TEST_CASE(rest_puts_spinning_workers_to_sleep_at_once) {
  constexpr std::int64_t kEndless = std::int64_t(1) << 50;
  ThreadPool pool(3, kEndless);
  std::atomic<int> runs{0};
  pool.parallel_for(64, 1, [&](std::int64_t b, std::int64_t e) { runs += int(e - b); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  BOOST_TEST(pool.sleeping() == 0);  // still spinning
  pool.rest();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.sleeping() < 2 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  BOOST_TEST(pool.sleeping() == 2);
  pool.parallel_for(64, 1, [&](std::int64_t b, std::int64_t e) { runs += int(e - b); });  // and they wake for work
  BOOST_TEST(runs.load() == 128);
}
