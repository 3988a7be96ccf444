# Suites of the simulator's hardware model (sim/model.cmake).
actorlm_test(sim/catalogue SOURCES ${CMAKE_CURRENT_LIST_DIR}/catalogue_test.cpp LIBS actorlm_sim_model)
actorlm_test(sim/memory_model SOURCES ${CMAKE_CURRENT_LIST_DIR}/memory_model_test.cpp LIBS actorlm_sim_model)
actorlm_test(sim/cost_model SOURCES ${CMAKE_CURRENT_LIST_DIR}/cost_model_test.cpp LIBS actorlm_sim_model)
actorlm_test(sim/sim_shard SOURCES ${CMAKE_CURRENT_LIST_DIR}/sim_shard_test.cpp LIBS actorlm_sim_backend)
