#pragma once
// main() of a GPU test suite, which defines BOOST_TEST_NO_MAIN and BOOST_TEST_ALTERNATIVE_INIT_API
// before including Boost.Test: without a CUDA device it says so and exits 77, which CTest reports
// as skipped (CI still compiles the suite). Include it once, in the suite's one source file.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
