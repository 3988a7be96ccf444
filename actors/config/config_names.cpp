// The TOML spellings of the enums and the one-line form of an error.
#include "actors/config/config.hpp"

namespace actorlm::config {

std::string_view to_string(Backend value) {
  switch (value) {
    case Backend::sim: return "sim";
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
  }
  return "?";
}

std::string_view to_string(Batching value) {
  switch (value) {
    case Batching::dynamic: return "dynamic";
    case Batching::continuous: return "continuous";
    case Batching::paged: return "paged";
  }
  return "?";
}

std::string_view to_string(Preemption value) {
  switch (value) {
    case Preemption::recompute: return "recompute";
    case Preemption::swap: return "swap";
    case Preemption::automatic: return "auto";  // `auto` is a C++ keyword, not a TOML one
  }
  return "?";
}

std::string_view to_string(SimClock value) {
  switch (value) {
    case SimClock::virtual_time: return "virtual";
    case SimClock::wall: return "wall";
  }
  return "?";
}

std::string_view to_string(CpuWeights value) {
  switch (value) {
    case CpuWeights::stored: return "stored";
    case CpuWeights::f32: return "f32";
  }
  return "?";
}

std::string_view to_string(CacheDtype value) {
  switch (value) {
    case CacheDtype::f16: return "f16";
    case CacheDtype::f32: return "f32";
  }
  return "?";
}

std::string_view to_string(SimParallelism value) {
  switch (value) {
    case SimParallelism::tensor: return "tensor";
    case SimParallelism::layers: return "layers";
  }
  return "?";
}

std::string_view to_string(SimFault value) {
  switch (value) {
    case SimFault::none: return "none";
    case SimFault::error: return "error";
    case SimFault::hang: return "hang";
    case SimFault::exit: return "exit";
  }
  return "?";
}

std::string ConfigError::to_string() const {
  std::string out = file;
  out += ':';
  if (line != 0) {
    out += std::to_string(line) + ':' + std::to_string(column) + ':';
  }
  out += ' ';
  if (!key.empty()) {
    out += key;
    out += ": ";
  }
  out += message;
  return out;
}

}  // namespace actorlm::config
