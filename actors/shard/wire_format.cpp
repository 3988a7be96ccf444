#include "actors/shard/wire_format.hpp"

#include <bit>
#include <cstring>
#include <type_traits>

namespace actorlm::shard {

namespace {

// Bumped whenever the layout below changes: a head and a worker of different builds refuse each
// other's steps instead of misreading them (the cluster's fingerprint names the version too).
constexpr std::uint32_t step_magic = 0x53544532;    // "STE2"
constexpr std::uint32_t result_magic = 0x52455334;  // "RES4"

class Writer {
 public:
  explicit Writer(std::vector<char>& out) : out_(out) { out_.clear(); }
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  // A count, then the elements' bytes (plain values: ids, tokens, block pairs).
  template <class T>
  void array(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<std::uint32_t>(static_cast<std::uint32_t>(v.size()));
    const std::size_t at = out_.size();
    out_.resize(at + v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(out_.data() + at, v.data(), v.size() * sizeof(T));
  }
  void reserve(std::size_t n) { out_.reserve(n); }

 private:
  std::vector<char>& out_;
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& in) : p_(in.data()), end_(in.data() + in.size()) {}
  template <class T>
  bool get(T& v) {
    if (std::size_t(end_ - p_) < sizeof(T)) return false;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  template <class T>
  bool array(std::vector<T>& v) {
    std::uint32_t n = 0;
    if (!get(n) || std::size_t(end_ - p_) / sizeof(T) < n) return false;
    v.resize(n);
    if (n > 0) std::memcpy(v.data(), p_, std::size_t(n) * sizeof(T));
    p_ += std::size_t(n) * sizeof(T);
    return true;
  }
  // A count of elements of at least `min_bytes` each: never more than the bytes left allow.
  bool count(std::uint32_t& n, std::size_t min_bytes) { return get(n) && std::size_t(end_ - p_) / min_bytes >= n; }
  bool done() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

void put_sampling(Writer& w, const SamplingParams& s) {
  w.put(s.temperature);
  w.put(s.top_p);
  w.put(s.top_k);
  w.put(s.min_p);
  w.put(s.seed);
  w.put<std::uint8_t>(s.logprobs);
  w.put(s.top_logprobs);
  w.put(s.presence_penalty);
  w.put(s.frequency_penalty);
  w.put(s.repetition_penalty);
  w.array(s.logit_bias);
  w.put(s.prompt_logprobs);
  w.put(s.min_tokens);
  w.array(s.min_tokens_stop_ids);
}

bool get_sampling(Reader& r, SamplingParams& s) {
  std::uint8_t logprobs = 0;
  const bool ok = r.get(s.temperature) && r.get(s.top_p) && r.get(s.top_k) && r.get(s.min_p) && r.get(s.seed) &&
                  r.get(logprobs) && r.get(s.top_logprobs) && r.get(s.presence_penalty) &&
                  r.get(s.frequency_penalty) && r.get(s.repetition_penalty) && r.array(s.logit_bias) &&
                  r.get(s.prompt_logprobs) && r.get(s.min_tokens) && r.array(s.min_tokens_stop_ids);
  s.logprobs = logprobs != 0;
  return ok;
}

// The fewest bytes an element's encoding takes (its arrays empty): a count is never allowed to ask
// for more elements than the bytes left could hold.
constexpr std::size_t sampling_min_bytes = 4 * 4 + 8 + 1 + 4 + 3 * 4 + 4 + 4 + 4 + 4;  // 57
constexpr std::size_t new_seq_min_bytes = 8 + 8 + 4 + 4 + 4 + sampling_min_bytes;         // 85
constexpr std::size_t seq_work_min_bytes = 8 + 4 + 4 * 4 + 1 + 4;                    // 33
constexpr std::size_t sampled_token_min_bytes = 8 + 4 + 4 + 4;                       // 20
constexpr std::size_t prompt_logprob_min_bytes = 8 + 4 + 4 + 4 + 4 + 4;              // 28

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian, as is the host");
static_assert(std::is_trivially_copyable_v<LogitBias> && sizeof(LogitBias) == 8);
static_assert(std::is_trivially_copyable_v<kv::BlockCopy> && sizeof(kv::BlockCopy) == 8);
static_assert(std::is_trivially_copyable_v<kv::BlockMove> && sizeof(kv::BlockMove) == 8);
static_assert(std::is_trivially_copyable_v<TopLogprob> && sizeof(TopLogprob) == 8);

}  // namespace

const char* wire_format_version() { return "STE2/RES4"; }

void encode_step(const Step& s, std::vector<char>& out) {
  Writer w(out);
  w.reserve(64 + s.seqs.size() * 40 + s.dropped.size() * 8);
  w.put(step_magic);
  w.put(s.id);
  w.put(s.block_size);
  w.array(s.dropped);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(s.added.size()));
  for (const NewSeq& n : s.added) {
    w.put(n.seq);
    w.put(n.request);
    w.put(n.sample);
    w.put(n.prompt_len);
    w.array(n.tokens);
    put_sampling(w, n.sampling);
  }
  w.put<std::uint32_t>(static_cast<std::uint32_t>(s.seqs.size()));
  for (const SeqWork& q : s.seqs) {
    w.put(q.seq);
    w.put(q.appended);
    w.put(q.begin);
    w.put(q.end);
    w.put(q.table_first);
    w.put(q.num_samples);
    w.put<std::uint8_t>(q.padding);
    w.array(q.table_blocks);
  }
  w.array(s.copies);
  w.array(s.swap_out);
  w.array(s.swap_in);
}

bool decode_step(const std::vector<char>& in, Step& s) {
  Reader r(in);
  std::uint32_t magic = 0, n = 0;
  if (!r.get(magic) || magic != step_magic || !r.get(s.id) || !r.get(s.block_size) || !r.array(s.dropped)) return false;
  if (!r.count(n, new_seq_min_bytes)) return false;
  s.added.resize(n);
  for (NewSeq& q : s.added)
    if (!r.get(q.seq) || !r.get(q.request) || !r.get(q.sample) || !r.get(q.prompt_len) || !r.array(q.tokens) ||
        !get_sampling(r, q.sampling))
      return false;
  if (!r.count(n, seq_work_min_bytes)) return false;
  s.seqs.resize(n);
  for (SeqWork& q : s.seqs) {
    std::uint8_t padding = 0;
    if (!r.get(q.seq) || !r.get(q.appended) || !r.get(q.begin) || !r.get(q.end) || !r.get(q.table_first) ||
        !r.get(q.num_samples) || !r.get(padding) || !r.array(q.table_blocks))
      return false;
    q.padding = padding != 0;
  }
  return r.array(s.copies) && r.array(s.swap_out) && r.array(s.swap_in) && r.done();
}

void encode_step_result(const StepResult& x, std::vector<char>& out) {
  Writer w(out);
  w.reserve(36 + x.tokens.size() * 20 + x.prompt_logprobs.size() * 28);
  w.put(result_magic);
  w.put(x.step_id);
  w.put(x.duration_ns);
  w.put(x.host_ns);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(x.tokens.size()));
  for (const SampledToken& t : x.tokens) {
    w.put(t.seq);
    w.put(t.token);
    w.put(t.logprob);
    w.array(t.top);
  }
  w.put<std::uint32_t>(static_cast<std::uint32_t>(x.prompt_logprobs.size()));
  for (const PromptLogprob& t : x.prompt_logprobs) {
    w.put(t.seq);
    w.put(t.position);
    w.put(t.token);
    w.put(t.logprob);
    w.array(t.top);
    w.put(t.rank);
  }
}

bool decode_step_result(const std::vector<char>& in, StepResult& x) {
  Reader r(in);
  std::uint32_t magic = 0, n = 0;
  if (!r.get(magic) || magic != result_magic || !r.get(x.step_id) || !r.get(x.duration_ns) || !r.get(x.host_ns) ||
      !r.count(n, sampled_token_min_bytes))
    return false;
  x.tokens.resize(n);
  for (SampledToken& t : x.tokens)
    if (!r.get(t.seq) || !r.get(t.token) || !r.get(t.logprob) || !r.array(t.top)) return false;
  if (!r.count(n, prompt_logprob_min_bytes)) return false;
  x.prompt_logprobs.resize(n);
  for (PromptLogprob& t : x.prompt_logprobs)
    if (!r.get(t.seq) || !r.get(t.position) || !r.get(t.token) || !r.get(t.logprob) || !r.array(t.top) ||
        !r.get(t.rank))
      return false;
  return r.done();
}

}  // namespace actorlm::shard
