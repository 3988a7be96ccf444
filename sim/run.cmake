# The simulation driver (the engine on CAF's virtual clock), scenario files and the capacity
# search: what `actorlm simulate`, `actorlm plan` and `actorlm bench sim` run.
add_library(actorlm_sim_run STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/simulation.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/scenario.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/scenario_run.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/plan.cpp)
target_include_directories(actorlm_sim_run PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(actorlm_sim_run PUBLIC actorlm_sim_backend actorlm_sim_workload
                      actorlm_config tomlplusplus::tomlplusplus CAF::core Threads::Threads)
