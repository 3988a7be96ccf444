# Suites of the simulator's workloads, traces, metrics and reports (sim/workload.cmake).
set(_sim_fixtures ACTORLM_SIM_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/fixtures")
actorlm_test(sim/workload SOURCES workload_test.cpp LIBS actorlm_sim_workload)
actorlm_test(sim/workload_toml SOURCES workload_toml_test.cpp LIBS actorlm_sim_workload)
target_compile_definitions(test_sim_workload_toml PRIVATE ${_sim_fixtures})
actorlm_test(sim/trace SOURCES trace_test.cpp LIBS actorlm_sim_workload)
target_compile_definitions(test_sim_trace PRIVATE ${_sim_fixtures})
actorlm_test(sim/metrics SOURCES metrics_test.cpp LIBS actorlm_sim_workload)
