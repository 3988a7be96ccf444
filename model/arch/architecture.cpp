#include "model/arch/architecture.hpp"

#include <sstream>

namespace actorlm::model {

std::string_view to_string(Family f) { return f == Family::llama ? "llama" : "falcon"; }
std::string_view to_string(FfnKind k) { return k == FfnKind::gelu ? "gelu" : "swiglu"; }
std::string_view to_string(NormKind k) { return k == NormKind::layernorm ? "layernorm" : "rmsnorm"; }

std::uint64_t Architecture::layer_params() const {
  const std::uint64_t h = hidden;
  const std::uint64_t q = std::uint64_t{heads} * head_dim;        // [hidden, heads * head_dim]
  const std::uint64_t kv = 2ull * kv_heads * head_dim;            // K and V: [hidden, kv_heads * head_dim]
  return h * q + h * kv + q * h                                   // Q, K, V, output projection
         + std::uint64_t{ffn_matrices()} * h * ffn                 // MLP
         + std::uint64_t{norms_per_layer} * norm_params();
}

std::uint64_t Architecture::embedding_params() const {
  return std::uint64_t{vocab} * hidden * (tied_embeddings ? 1 : 2);
}

std::uint64_t Architecture::params() const {
  return std::uint64_t{layers} * layer_params() + embedding_params() + norm_params();
}

std::string Architecture::describe() const {
  std::ostringstream o;
  o << to_string(family) << ": " << layers << " layers, hidden " << hidden << ", heads " << heads << "/"
    << kv_heads << " kv, head_dim " << head_dim << ", ffn " << ffn << ", vocab " << vocab
    << (tied_embeddings ? ", tied embeddings" : "") << (two_norms() ? ", two layer norms" : "")
    << ", rope theta " << rope_theta;
  return o.str();
}

std::vector<ArchitectureProblem> problems(const Architecture& a) {
  std::vector<ArchitectureProblem> out;
  auto add = [&](const char* field, std::string message) { out.push_back({field, std::move(message)}); };
  auto positive = [&](const char* field, std::uint32_t v) {
    if (v == 0) add(field, "must be positive");
  };
  positive("layers", a.layers);
  positive("hidden", a.hidden);
  positive("heads", a.heads);
  positive("kv_heads", a.kv_heads);
  positive("head_dim", a.head_dim);
  positive("ffn", a.ffn);
  positive("vocab", a.vocab);
  positive("max_context", a.max_context);
  if (a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads != 0)
    add("kv_heads", "must divide heads (" + std::to_string(a.heads) + "), found " + std::to_string(a.kv_heads));
  // Rotary embeddings rotate pairs of dimensions.
  if (a.head_dim % 2 != 0) add("head_dim", "must be even (rotary pairs), found " + std::to_string(a.head_dim));
  if (!(a.norm_eps > 0)) add("norm_eps", "must be positive");
  if (!(a.rope_theta > 0)) add("rope_theta", "must be positive");
  if (!(a.rope_linear_factor > 0)) add("rope_linear_factor", "must be positive");
  // Each family has one block design; a description that contradicts it would be run (by the cpu
  // backend) or costed (by the simulator) as a network that does not exist.
  const std::string fam = " for the " + std::string(to_string(a.family)) + " family";
  const bool llama = a.family == Family::llama;
  if (a.norm != (llama ? NormKind::rmsnorm : NormKind::layernorm))
    add("norm", "must be " + std::string(llama ? "rmsnorm" : "layernorm") + fam);
  if (a.ffn_kind != (llama ? FfnKind::swiglu : FfnKind::gelu))
    add("ffn_kind", "must be " + std::string(llama ? "swiglu" : "gelu") + fam);
  if (a.parallel_attention == llama)
    add("parallel_attention", "must be " + std::string(llama ? "false" : "true") + fam);
  if (llama ? a.norms_per_layer != 2 : (a.norms_per_layer != 1 && a.norms_per_layer != 2))
    add("norms_per_layer", "must be " + std::string(llama ? "2" : "1 or 2") + fam);
  return out;
}

std::string to_string(const std::vector<ArchitectureProblem>& problems) {
  std::string text;
  for (const auto& p : problems) text += (text.empty() ? "" : "; ") + p.field + ": " + p.message;
  return text;
}

}  // namespace actorlm::model
