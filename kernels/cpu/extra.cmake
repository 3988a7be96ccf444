# Host-side kernels of the cpu backend beyond KV block ops, included from kernels/CMakeLists.txt.

# Next-token sampling (greedy, temperature, top-k, top-p, min-p, log-probabilities).
add_library(actorlm_kernels_cpu_sampling STATIC ${CMAKE_CURRENT_LIST_DIR}/sampling.cpp)
target_include_directories(actorlm_kernels_cpu_sampling PUBLIC ${PROJECT_SOURCE_DIR})
# No fused multiply-add where the target has one: the GPU draw (kernels/cuda/draw_math.hpp)
# computes the tempered weights with separate IEEE operations and must get the same bits.
target_compile_options(actorlm_kernels_cpu_sampling PRIVATE -ffp-contract=off)

# All-reduce, broadcast and point to point among tensor-parallel shards (process memory for ranks
# of one process, Gloo over TCP across processes). Gloo stays out of the public header, so it
# links privately.
add_library(actorlm_kernels_cpu_collective STATIC ${CMAKE_CURRENT_LIST_DIR}/collective.cpp
            ${CMAKE_CURRENT_LIST_DIR}/local_group.cpp ${CMAKE_CURRENT_LIST_DIR}/rank_order_sum.cpp)
target_include_directories(actorlm_kernels_cpu_collective PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(actorlm_kernels_cpu_collective PRIVATE gloo Threads::Threads)
actorlm_hot_code(actorlm_kernels_cpu_sampling)
actorlm_hot_code(actorlm_kernels_cpu_collective)
