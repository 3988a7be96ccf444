// The sim backend behind a served model: the catalogue's model on modelled GPUs. There are no
// weights and no tokenizer: prompts are measured by the synthetic codec and the answers are
// token ids drawn from the model's vocabulary, timed by the cost model on the wall clock.
#include "actors/serving/served_model.hpp"

#include "sim/sim_backend.hpp"

namespace actorlm::serving {

void ServedModel::load_sim(const config::Config& cfg, engine::KvCapacity& capacity, engine::ShardFactory& factory) {
  if (cfg.sim.clock != config::SimClock::wall)
    throw std::invalid_argument("engine.backend = \"sim\" serves HTTP in wall-clock time: set sim.clock = \"wall\" "
                                "(\"virtual\" is for actorlm simulate)");
  const sim::SimBackend b = sim::load_sim_backend(cfg);
  capacity = b.capacity;
  factory = b.factory;
  codec_ = make_synthetic_codec(b.capacity.vocab_size);
  description_ = "synthetic text with modelled timing: " + b.describe();
}

}  // namespace actorlm::serving
