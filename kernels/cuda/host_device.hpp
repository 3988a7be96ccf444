#pragma once
// ACTORLM_HD marks a function that nvcc compiles for the device and the host, and any other
// compiler for the host: the per-element math that the CPU test suite checks.
#if defined(__CUDACC__)
#define ACTORLM_HD __host__ __device__
#else
#define ACTORLM_HD
#endif
