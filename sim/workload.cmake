# Workloads, trace replay, metrics and reports: plain C++ (no CAF), used by the simulation driver.
add_library(actorlm_sim_workload STATIC
  workload.cpp
  workload_toml.cpp
  trace.cpp
  metrics.cpp
  report.cpp
  svg_plot.cpp)
target_include_directories(actorlm_sim_workload PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(actorlm_sim_workload
  PUBLIC actorlm_config tomlplusplus::tomlplusplus nlohmann_json::nlohmann_json)
