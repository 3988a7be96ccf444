# Finds the C++ Actor Framework as Debian packages it (libcaf-dev 0.17): headers under
# /usr/include/caf and three libraries, with no CMake config or pkg-config file of its own.
# Defines CAF::core, CAF::io, CAF::openssl and CAF_VERSION (1706 means 0.17.6).
find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY caf_core)
find_library(CAF_IO_LIBRARY caf_io)
find_library(CAF_OPENSSL_LIBRARY caf_openssl)

if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" CAF_VERSION "${_caf_version_line}")
  math(EXPR _caf_major "${CAF_VERSION} / 10000")
  math(EXPR _caf_minor "(${CAF_VERSION} / 100) % 100")
  math(EXPR _caf_patch "${CAF_VERSION} % 100")
  set(CAF_VERSION_STRING "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY CAF_OPENSSL_LIBRARY
  VERSION_VAR CAF_VERSION_STRING)

if(CAF_FOUND)
  foreach(_part core io openssl)
    string(TOUPPER ${_part} _upper)
    if(NOT TARGET CAF::${_part})
      add_library(CAF::${_part} UNKNOWN IMPORTED)
      set_target_properties(CAF::${_part} PROPERTIES
        IMPORTED_LOCATION "${CAF_${_upper}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
    endif()
  endforeach()
  set_property(TARGET CAF::io APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::core)
  set_property(TARGET CAF::openssl APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::io)
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY CAF_OPENSSL_LIBRARY)
