// The sim backend behind a served model: arrives with sim/sim_backend (issue 4).
#include "actors/serving/served_model.hpp"

#include <stdexcept>

namespace actorlm::serving {

void ServedModel::load_sim(const config::Config&, engine::KvCapacity&, engine::ShardFactory&) {
  throw std::invalid_argument("engine.backend = \"sim\" cannot serve a model in this build");
}

}  // namespace actorlm::serving
