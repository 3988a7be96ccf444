#pragma once
// glibc's vector expf for AVX2 (libmvec; Debian's libm.so links libmvec.so.1 as needed): eight
// lanes per call, within 1 ulp of the correctly rounded result as std::exp is, for the cpu
// kernels' AVX2 paths (functions built with target("avx2,fma")), chosen where
// cpu_has_avx2_fma(). Per position or per element, one scalar std::exp call costs about as much
// as the rest of a decode step's attention or SiLU arithmetic.

#include <cstddef>  // defines __GLIBC__ where the C library is glibc

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace actorlm::kernels::cpu {
inline bool cpu_has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
}  // namespace actorlm::kernels::cpu

#if defined(__GLIBC__)
#define ACTORLM_VECTOR_EXP 1
extern "C" __attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256);
#endif
#endif
