# Suites of the simulator's hardware model (sim/model.cmake).
actorlm_test(sim/catalogue SOURCES ${CMAKE_CURRENT_LIST_DIR}/catalogue_test.cpp LIBS actorlm_sim_model)
