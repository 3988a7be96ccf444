#include "model/tokenizer/pre_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <stdexcept>

namespace actorlm::model {

namespace {

// The patterns as written in the models' tokenizer.json files and llama.cpp (llama-vocab.cpp).
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 = PreTokenizer::llama3_regex;
constexpr std::string_view kDigit = R"(\p{N})";
constexpr std::string_view kPunctuation = R"([\p{P}\$\+<=>\^~\|`]+)";
// Falcon's Digits and Split run after ByteLevel, on the byte-level spelling, whose numeric
// characters are the spellings of the bytes 0-9, B2 B3 B9 (superscripts) and BC-BE (fractions);
// so these two match raw bytes, and may cut a UTF-8 character ("м" is D0 BC).
constexpr std::string_view kSpelledDigitRun = R"([0-9\xB2\xB3\xB9\xBC-\xBE]+)";
constexpr std::string_view kThreeDigits = R"([0-9][0-9][0-9])";

struct Pattern {
  std::string_view source;
  bool utf = true;  // false: matched against raw bytes
};

struct Family {
  std::string_view canonical;
  std::vector<std::string_view> aliases;
  std::vector<Pattern> patterns;
};

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"gpt2", {"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais"}, {{kGpt2}}},
      {"smollm",
       {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
       {{kDigit}, {kGpt2}}},
      {"llama-bpe",
       {"llama-bpe", "llama3", "llama-v3", "falcon3", "dbrx", "smaug-bpe"},
       {{kLlama3}}},
      // tiiuae/falcon-7b tokenizer.json: Sequence[Punctuation(Contiguous), ByteLevel(use_regex),
      // Digits(individual_digits=false), Split("[0-9][0-9][0-9]", Isolated)].
      {"falcon",
       {"falcon"},
       {{kPunctuation}, {kGpt2}, {kSpelledDigitRun, false}, {kThreeDigits, false}}},
  };
  return f;
}

const Family* find_family(std::string_view name) {
  for (const Family& f : families()) {
    for (const auto alias : f.aliases) {
      if (alias == name) return &f;
    }
  }
  return nullptr;
}

// Oniguruma's \s (HF tokenizers): TAB..CR, NEL and the Z categories. PCRE2's UCP \s also takes
// U+180E, and has varied between versions, so the patterns spell the class out.
constexpr std::string_view kSpaceClass = R"(\t-\r\x{85}\p{Z})";

std::string spell_out_spaces(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kSpaceClass) : "[" + std::string(kSpaceClass) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kSpaceClass) + "]";
      } else if (e == 'S') {
        throw std::logic_error("\\S inside a character class is not supported");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class)
      in_class = true;
    else if (c == ']' && in_class)
      in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  std::string pattern;

  explicit Regex(Pattern source) : pattern(spell_out_spaces(source.source)) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    const std::uint32_t options = source.utf ? PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF : 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                         &error, &offset, nullptr);
    if (code == nullptr) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error, message.data(), message.size());
      throw std::logic_error("pre-tokenizer pattern " + pattern + " does not compile at offset " +
                             std::to_string(offset) + ": " +
                             reinterpret_cast<const char*>(message.data()));
    }
    pcre2_jit_compile(code,
                      PCRE2_JIT_COMPLETE);  // optional: matching falls back to the interpreter
  }
  ~Regex() { pcre2_code_free(code); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the pieces of `piece` (matches and the gaps between them) to `out`.
  void split(std::string_view piece, pcre2_match_data* match,
             std::vector<std::string_view>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    std::size_t gap_start = 0;  // start of the text not yet emitted
    std::size_t search_from = 0;
    while (search_from < piece.size()) {
      int rc = pcre2_match(code, subject, piece.size(), search_from, 0, match, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(code, subject, piece.size(), search_from, PCRE2_NO_JIT, match, nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        std::array<PCRE2_UCHAR, 256> message{};
        pcre2_get_error_message(rc, message.data(), message.size());
        throw std::runtime_error("pre-tokenizer regex failed on a piece of " +
                                 std::to_string(piece.size()) +
                                 " bytes: " + reinterpret_cast<const char*>(message.data()));
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      const std::size_t begin = ovector[0], end = ovector[1];
      if (end == begin) {  // no pattern here matches empty; step past it all the same
        search_from = begin + 1;
        continue;
      }
      if (begin > gap_start) out.push_back(piece.substr(gap_start, begin - gap_start));
      out.push_back(piece.substr(begin, end - begin));
      gap_start = search_from = end;
    }
    if (gap_start < piece.size()) out.push_back(piece.substr(gap_start));
  }
};

PreTokenizer::PreTokenizer(std::string_view name) {
  const Family* family = find_family(name);
  if (family == nullptr) {
    std::string known;
    for (const Family& f : families()) {
      for (const auto alias : f.aliases) known += (known.empty() ? "" : ", ") + std::string(alias);
    }
    throw std::invalid_argument("unknown pre-tokenizer type '" + std::string(name) +
                                "' (known: " + known + ")");
  }
  for (const auto pattern : family->patterns) regexes_.push_back(std::make_unique<Regex>(pattern));
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  // Group 0 only; one match block serves every pattern.
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create(1, nullptr), &pcre2_match_data_free);
  if (!match) throw std::bad_alloc();
  for (const auto& regex : regexes_) {
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const auto piece : pieces) regex->split(piece, match.get(), next);
    pieces.swap(next);
  }
  return pieces;
}

bool PreTokenizer::is_known(std::string_view name) { return find_family(name) != nullptr; }

std::string_view PreTokenizer::canonical(std::string_view name) {
  const Family* family = find_family(name);
  if (family == nullptr)
    throw std::invalid_argument("unknown pre-tokenizer type '" + std::string(name) + "'");
  return family->canonical;
}

}  // namespace actorlm::model
