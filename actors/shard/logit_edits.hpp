#pragma once
// A sequence's SamplingParams changes to its row of logits (HostSampler::process_row's) as one
// edit per token (kernels/cuda/logit_edit_math.hpp), for a backend that changes the row where it
// lives: the cuda sampler sends them with the step and applies them on the GPU. Plain C++.

#include "actors/shard/sequence_state.hpp"
#include "kernels/cuda/logit_edit_math.hpp"

#include <cstddef>
#include <vector>

namespace actorlm::shard {

// Appends sequence s's edits of a row of `vocab` logits to `out`: one per token it changes, in
// ascending token order, none for ids outside the vocabulary. Applied with apply_logit_edit they
// give HostSampler::process_row's bits. Returns false and appends nothing where they cannot: a
// token of the vocabulary listed twice in logit_bias (the host adds the two biases one after the
// other).
bool logit_edits(const SequenceState::Sequence& s, std::size_t vocab,
                 std::vector<kernels::cuda_math::LogitEdit>& out);

}  // namespace actorlm::shard
