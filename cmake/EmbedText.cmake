# Run as a script at build time: writes OUTPUT, a C++ file defining
#   std::string_view NAMESPACE::SYMBOL  holding the bytes of INPUT.
# Used to embed configs/default.toml in the actorlm binary.
file(READ "${INPUT}" _hex HEX)
string(LENGTH "${_hex}" _len)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," _bytes "${_hex}")
math(EXPR _n "${_len} / 2")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/EmbedText.cmake; do not edit.\n"
  "#include <string_view>\n"
  "namespace ${NAMESPACE} {\n"
  "static const char ${SYMBOL}_bytes[] = {${_bytes} '\\0'};\n"
  "extern const std::string_view ${SYMBOL}{${SYMBOL}_bytes, ${_n}};\n"
  "}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
