#include "model/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <queue>
#include <stdexcept>
#include <unordered_map>

#include "model/tokenizer/byte_level.hpp"
#include "model/tokenizer/pre_tokenizer.hpp"

namespace actorlm::model {

namespace {

constexpr std::int32_t kControl = 3;
constexpr std::int32_t kUserDefined = 4;

// "left right": split at the first space after the first character (llama.cpp's rule, so a
// left half may itself start with a space in vocabularies that are not byte-level).
std::optional<std::pair<std::string_view, std::string_view>> merge_halves(std::string_view merge) {
  const auto space = merge.find(' ', 1);
  if (space == std::string_view::npos || space + 1 >= merge.size()) return std::nullopt;
  return std::pair{merge.substr(0, space), merge.substr(space + 1)};
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, Token, StringHash, std::equal_to<>>;

// Later duplicates win, as in llama.cpp's token_to_id.
TokenIds index_tokens(const std::vector<std::string>& tokens) {
  TokenIds ids;
  ids.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) ids[tokens[i]] = static_cast<Token>(i);
  return ids;
}

std::optional<Token> lookup(const TokenIds& ids, std::string_view text) {
  const auto it = ids.find(text);
  if (it == ids.end()) return std::nullopt;
  return it->second;
}

std::uint64_t pair_key(Token left, Token right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

struct Merge {
  std::int32_t rank;
  Token result;
};

// A candidate merge of the symbol at `left` with the one after it; stale once either changed.
struct Candidate {
  std::int32_t rank;
  std::int32_t left;
  Token left_id, right_id;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;  // lowest rank, then leftmost
  }
};

}  // namespace

std::optional<VocabularyProblem> find_problem(const Vocabulary& v) {
  const auto n = static_cast<std::int64_t>(v.tokens.size());
  if (n == 0) return VocabularyProblem{"tokens", "no tokens"};
  if (n > std::int64_t{1} << 31) return VocabularyProblem{"tokens", "more than 2^31 tokens"};
  if (!v.token_types.empty() && static_cast<std::int64_t>(v.token_types.size()) != n) {
    return VocabularyProblem{
        "token_types",
        std::to_string(v.token_types.size()) + " token types for " + std::to_string(n) + " tokens"};
  }
  if (!PreTokenizer::is_known(v.pre)) {
    return VocabularyProblem{"pre", "unknown pre-tokenizer type '" + v.pre + "'"};
  }
  for (const auto& [field, id] : {std::pair{"bos", v.bos}, std::pair{"eos", v.eos},
                                  std::pair{"unk", v.unk}, std::pair{"pad", v.pad}}) {
    if (id < -1 || id >= n) {
      return VocabularyProblem{field, "token id " + std::to_string(id) + " is outside the " +
                                          std::to_string(n) + " tokens"};
    }
  }
  const TokenIds ids = index_tokens(v.tokens);
  std::string joined;
  for (std::size_t i = 0; i < v.merges.size(); ++i) {
    const auto where = "merge " + std::to_string(i) + " '" + v.merges[i] + "'";
    const auto halves = merge_halves(v.merges[i]);
    if (!halves)
      return VocabularyProblem{"merges", where + " is not two tokens separated by a space"};
    joined.assign(halves->first).append(halves->second);
    for (const std::string_view part : {halves->first, halves->second, std::string_view(joined)}) {
      if (!ids.contains(part)) {
        return VocabularyProblem{"merges", where + ": '" + std::string(part) + "' is not a token"};
      }
    }
  }
  return std::nullopt;
}

struct Tokenizer::Impl {
  Vocabulary vocab;
  PreTokenizer pre;
  TokenIds ids;                                     // spelling -> id
  std::array<Token, 256> byte_token{};              // [256] id of each byte's spelling, -1 if none
  std::unordered_map<std::uint64_t, Merge> merges;  // pair_key(left, right) -> rank, result
  std::vector<std::string> bytes;                   // [n_vocab] raw bytes of each token
  struct Special {
    std::string text;
    Token id;
    bool control;
  };
  std::vector<Special> specials;                                       // longest first
  std::array<std::vector<std::uint32_t>, 256> specials_by_first_byte;  // indices into specials

  explicit Impl(Vocabulary v) : vocab(std::move(v)), pre(vocab.pre) {
    if (const auto problem = find_problem(vocab)) {
      throw std::invalid_argument("tokenizer vocabulary: " + problem->field + ": " +
                                  problem->message);
    }
    ids = index_tokens(vocab.tokens);
    for (unsigned b = 0; b < 256; ++b) {
      byte_token[b] = lookup(ids, byte_level::spellings()[b]).value_or(-1);
    }
    merges.reserve(vocab.merges.size());
    std::string joined;
    for (std::size_t rank = 0; rank < vocab.merges.size(); ++rank) {
      const auto halves = merge_halves(vocab.merges[rank]);
      joined.assign(halves->first).append(halves->second);
      // try_emplace: a repeated pair keeps its first (lowest) rank.
      // find_problem() checked that all three are tokens.
      merges.try_emplace(pair_key(*lookup(ids, halves->first), *lookup(ids, halves->second)),
                         Merge{static_cast<std::int32_t>(rank), *lookup(ids, joined)});
    }
    bytes.reserve(vocab.tokens.size());
    for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
      const std::string& text = vocab.tokens[i];
      const std::int32_t type = type_of(static_cast<Token>(i));
      if (type == kControl || type == kUserDefined) {
        bytes.push_back(text);
        if (!text.empty()) specials.push_back({text, static_cast<Token>(i), type == kControl});
      } else {
        // Not every spelling is byte-level (an added token "<think> " in a plain vocabulary);
        // those are their own text, as HF's ByteLevel decoder falls back to.
        bytes.push_back(byte_level::decode(text).value_or(text));
      }
    }
    std::stable_sort(specials.begin(), specials.end(), [](const Special& a, const Special& b) {
      return a.text.size() > b.text.size();
    });
    for (std::uint32_t i = 0; i < specials.size(); ++i) {
      specials_by_first_byte[static_cast<unsigned char>(specials[i].text[0])].push_back(i);
    }
  }

  std::int32_t type_of(Token t) const {
    return vocab.token_types.empty() ? 1 : vocab.token_types[static_cast<std::size_t>(t)];
  }

  void check(Token t) const {
    if (t < 0 || static_cast<std::size_t>(t) >= vocab.tokens.size()) {
      throw std::out_of_range("token id " + std::to_string(t) + " is outside the " +
                              std::to_string(vocab.tokens.size()) + " tokens");
    }
  }

  // The leftmost special token in text[from..], longest at that position: {position, index}.
  std::optional<std::pair<std::size_t, std::uint32_t>> next_special(std::string_view text,
                                                                    std::size_t from,
                                                                    bool parse_special) const {
    for (std::size_t pos = from; pos < text.size(); ++pos) {
      for (const std::uint32_t i : specials_by_first_byte[static_cast<unsigned char>(text[pos])]) {
        const Special& s = specials[i];
        if ((parse_special || !s.control) && text.substr(pos).starts_with(s.text)) {
          return std::pair{pos, i};
        }
      }
    }
    return std::nullopt;
  }

  struct Scratch {
    std::vector<Token> id;           // [n_symbols] current token of each symbol, -1 if no token
    std::vector<std::int32_t> next;  // [n_symbols] following live symbol, -1 at the end
    std::vector<std::int32_t> prev;  // [n_symbols] preceding live symbol, -1 at the start
    std::vector<bool> alive;         // [n_symbols]
    std::vector<Candidate> heap;
  };

  void push_candidate(Scratch& s, std::int32_t left) const {
    const std::int32_t right = s.next[left];
    if (right < 0 || s.id[left] < 0 || s.id[right] < 0) return;
    const auto it = merges.find(pair_key(s.id[left], s.id[right]));
    if (it == merges.end()) return;
    s.heap.push_back({it->second.rank, left, s.id[left], s.id[right]});
    std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
  }

  // A symbol with no token is dropped, not made `unk`: HF BPE with unk_token null (SmolLM2's
  // tokenizer.json, although its GGUF names an unknown token) and llama.cpp both drop it.
  static void emit(Token id, std::vector<Token>& out) {
    if (id >= 0) out.push_back(id);
  }

  // BPE over one pre-tokenized piece: start from one symbol per byte, repeatedly apply the
  // lowest-ranked merge present (leftmost on ties) until none applies.
  void bpe(std::string_view piece, std::vector<Token>& out, Scratch& s) const {
    if (vocab.ignore_merges && piece.size() > 1) {
      if (const auto whole = lookup(ids, byte_level::encode(piece))) {
        out.push_back(*whole);
        return;
      }
    }
    const auto n = static_cast<std::int32_t>(piece.size());
    s.id.resize(n);
    s.next.resize(n);
    s.prev.resize(n);
    s.alive.assign(n, true);
    s.heap.clear();
    for (std::int32_t i = 0; i < n; ++i) {
      s.id[i] = byte_token[static_cast<unsigned char>(piece[i])];
      s.prev[i] = i - 1;
      s.next[i] = i + 1 < n ? i + 1 : -1;
    }
    for (std::int32_t i = 0; i + 1 < n; ++i) push_candidate(s, i);
    while (!s.heap.empty()) {
      std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
      const Candidate c = s.heap.back();
      s.heap.pop_back();
      const std::int32_t right = s.next[c.left];
      if (!s.alive[c.left] || s.id[c.left] != c.left_id || right < 0 || s.id[right] != c.right_id) {
        continue;  // one side merged since this candidate was queued
      }
      s.id[c.left] = merges.at(pair_key(c.left_id, c.right_id)).result;
      s.alive[right] = false;
      s.next[c.left] = s.next[right];
      if (s.next[right] >= 0) s.prev[s.next[right]] = c.left;
      if (s.prev[c.left] >= 0) push_candidate(s, s.prev[c.left]);
      push_candidate(s, c.left);
    }
    for (std::int32_t i = 0; i >= 0; i = s.next[i]) emit(s.id[i], out);
  }

  void encode_text(std::string_view text, std::vector<Token>& out, Scratch& s) const {
    for (const std::string_view piece : pre.split(text)) {
      if (piece.size() == 1) {
        emit(byte_token[static_cast<unsigned char>(piece[0])], out);
      } else {
        bpe(piece, out, s);
      }
    }
  }
};

Tokenizer::Tokenizer(Vocabulary vocab) : impl_(std::make_unique<Impl>(std::move(vocab))) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<Token> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<Token> out;
  out.reserve(text.size() / 3 + 1);
  Impl::Scratch scratch;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto special = impl_->next_special(text, pos, parse_special);
    const std::size_t end = special ? special->first : text.size();
    if (end > pos) impl_->encode_text(text.substr(pos, end - pos), out, scratch);
    if (!special) break;
    const Impl::Special& s = impl_->specials[special->second];
    out.push_back(s.id);
    pos = end + s.text.size();
  }
  return out;
}

std::string Tokenizer::decode(std::span<const Token> tokens) const {
  std::string out;
  for (const Token t : tokens) out += token_bytes(t);
  return out;
}

std::string_view Tokenizer::token_bytes(Token t) const {
  impl_->check(t);
  return impl_->bytes[static_cast<std::size_t>(t)];
}

bool Tokenizer::is_special(Token t) const {
  impl_->check(t);
  const auto type = impl_->type_of(t);
  return type == kControl || type == kUserDefined;
}

bool Tokenizer::is_control(Token t) const {
  impl_->check(t);
  return impl_->type_of(t) == kControl;
}

std::size_t Tokenizer::size() const { return impl_->vocab.tokens.size(); }

const Vocabulary& Tokenizer::vocabulary() const { return impl_->vocab; }

}  // namespace actorlm::model
