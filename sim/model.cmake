# The simulator's model of the hardware: catalogue, memory and cost models (plain C++, no CAF),
# and the sim shard backend built on them (CAF).

# configs/catalogue/*.toml are embedded so the simulator works from any directory.
set(_sim_embedded)
foreach(_file hardware models)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/embedded_${_file}_catalogue.cpp)
  if(_file STREQUAL "models")
    set(_symbol embedded_model_catalogue)
  else()
    set(_symbol embedded_hardware_catalogue)
  endif()
  add_custom_command(
    OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${PROJECT_SOURCE_DIR}/configs/catalogue/${_file}.toml
            -DOUTPUT=${_out} -DNAMESPACE=actorlm::sim -DSYMBOL=${_symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedText.cmake
    DEPENDS ${PROJECT_SOURCE_DIR}/configs/catalogue/${_file}.toml
            ${PROJECT_SOURCE_DIR}/cmake/EmbedText.cmake
    COMMENT "Embedding configs/catalogue/${_file}.toml")
  list(APPEND _sim_embedded ${_out})
endforeach()

add_library(actorlm_sim_model STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/catalogue.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/memory_model.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cost_model.cpp
  ${_sim_embedded})
target_include_directories(actorlm_sim_model PUBLIC ${PROJECT_SOURCE_DIR})
# actorlm_config: its TableReader checks catalogue values the way config values are checked.
target_link_libraries(actorlm_sim_model PRIVATE actorlm_config tomlplusplus::tomlplusplus)

add_library(actorlm_sim_backend STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/sim_shard.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/sim_backend.cpp)
target_include_directories(actorlm_sim_backend PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(actorlm_sim_backend PUBLIC actorlm_sim_model actorlm_engine actorlm_config CAF::core)
