// libFuzzer target: GgufFile::open and read_f32 of every tensor on arbitrary bytes.
#include "model/format/gguf_file.hpp"
#include "tools/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  actorlm::fuzz::exercise([](const std::string& p) { return actorlm::model::GgufFile::open(p); },
                          data, size);
  return 0;
}
