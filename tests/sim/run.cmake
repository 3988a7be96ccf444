# Suites of the simulation driver, scenarios and capacity search (sim/run.cmake).
set(_scenarios ACTORLM_SCENARIOS="${PROJECT_SOURCE_DIR}/configs/scenarios")
actorlm_test(sim/simulation SOURCES ${CMAKE_CURRENT_LIST_DIR}/simulation_test.cpp LIBS actorlm_sim_run)
target_compile_definitions(test_sim_simulation PRIVATE ${_scenarios})
actorlm_test(sim/scenario SOURCES ${CMAKE_CURRENT_LIST_DIR}/scenario_test.cpp LIBS actorlm_sim_run)
target_compile_definitions(test_sim_scenario PRIVATE ${_scenarios})
actorlm_test(sim/plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/plan_test.cpp LIBS actorlm_sim_run)
