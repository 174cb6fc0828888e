#include "engine/tokenizer/qwen_pre_tokenizer.h"

#include <cstdint>

#include "engine/tokenizer/unicode_class.h"
#include "engine/tokenizer/utf8.h"

namespace tributary {
namespace {

// One decoded code point.
struct Cp {
  char32_t cp;
  uint8_t cls;
  uint8_t len;
};

class Scanner {
 public:
  Scanner(absl::string_view text, bool marks_join_letters)
      : data_(reinterpret_cast<const uint8_t*>(text.data())),
        size_(text.size()),
        marks_join_letters_(marks_join_letters) {}

  Cp At(size_t pos) const {
    const uint8_t b = data_[pos];
    if (b < 0x80) return {b, CodePointClass(b), 1};
    Utf8Step step = NextUtf8(data_ + pos, size_ - pos);
    if (step.kind != Utf8Step::kValid) {
      // Not reachable with valid input; treat the bytes as punctuation.
      return {0xFFFD, 0, static_cast<uint8_t>(step.num_bytes)};
    }
    return {step.code_point, CodePointClass(step.code_point),
            static_cast<uint8_t>(step.num_bytes)};
  }

  // \p{L} (Qwen2) or [\p{L}\p{M}] (Qwen3.5).
  bool Letterish(uint8_t cls) const {
    return (cls & kClassLetter) || (marks_join_letters_ && (cls & kClassMark));
  }
  // [^\s\p{L}\p{N}] (Qwen2) or [^\s\p{L}\p{M}\p{N}] (Qwen3.5).
  bool Punct(uint8_t cls) const {
    if (cls & (kClassSpace | kClassLetter | kClassNumber)) return false;
    return !(marks_join_letters_ && (cls & kClassMark));
  }

  // The end of the run of Letterish code points starting at `pos`.
  size_t LetterRunEnd(size_t pos) const {
    while (pos < size_) {
      Cp c = At(pos);
      if (!Letterish(c.cls)) break;
      pos += c.len;
    }
    return pos;
  }
  size_t PunctRunEnd(size_t pos) const {
    while (pos < size_) {
      Cp c = At(pos);
      if (!Punct(c.cls)) break;
      pos += c.len;
    }
    return pos;
  }

  // Simple case folding for the contraction letters: ASCII upper case and
  // U+017F LATIN SMALL LETTER LONG S, which folds to 's' (Oniguruma and
  // PCRE2 both match it under (?i)). U+212A KELVIN SIGN folds to 'k',
  // which no contraction uses.
  static char32_t Fold(char32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
    if (cp == 0x17F) return 's';
    return cp;
  }

  // The end of the match starting at `pos`, or `pos` when no alternative
  // matches there.
  size_t MatchAt(size_t pos) const {
    const Cp c = At(pos);
    const size_t next = pos + c.len;
    const bool has_next = next < size_;
    const Cp n = has_next ? At(next) : Cp{0, 0, 0};

    // 1. (?i:'s|'t|'re|'ve|'m|'ll|'d): no two alternatives share a first
    //    letter except none, so order does not matter.
    if (c.cp == '\'' && has_next) {
      const char32_t f1 = Fold(n.cp);
      if (f1 == 's' || f1 == 't' || f1 == 'm' || f1 == 'd') return next + n.len;
      if ((f1 == 'r' || f1 == 'v' || f1 == 'l') && next + n.len < size_) {
        const Cp n2 = At(next + n.len);
        const char32_t f2 = Fold(n2.cp);
        if ((f1 != 'l' && f2 == 'e') || (f1 == 'l' && f2 == 'l')) {
          return next + n.len + n2.len;
        }
      }
    }
    // 2. [^\r\n\p{L}\p{N}]?\p{L}+ : the greedy letter run, preceded by one
    //    optional code point of the class. When the current code point is
    //    itself a letter the optional part cannot match it (\p{L} is
    //    excluded from its class). For Qwen3.5 a mark matches both the
    //    optional class and the run; either way the match is the maximal
    //    [\p{L}\p{M}] run from `pos`.
    if (Letterish(c.cls)) return LetterRunEnd(pos);
    if (!(c.cls & (kClassCrLf | kClassLetter | kClassNumber)) && has_next &&
        Letterish(n.cls)) {
      return LetterRunEnd(next);
    }
    // 3. \p{N}: one digit.
    if (c.cls & kClassNumber) return next;
    // 4. ` ?[^\s\p{L}\p{N}]+[\r\n]*`: the optional space only helps when a
    //    punctuation run follows it (a space is not punctuation itself);
    //    both greedy quantifiers take everything, and [\r\n]* never fails,
    //    so no backtracking is needed.
    size_t punct_start = pos;
    if (c.cp == ' ' && has_next && Punct(n.cls)) punct_start = next;
    if (punct_start != pos || Punct(c.cls)) {
      size_t end = PunctRunEnd(punct_start);
      while (end < size_ && (data_[end] == '\r' || data_[end] == '\n')) ++end;
      return end;
    }
    if (!(c.cls & kClassSpace)) return pos;
    // 5-7 on the maximal whitespace run [pos, run_end):
    //   \s*[\r\n]+ : \s* backtracks from the end of the run to the last
    //                CR/LF of the run; the match ends just after it.
    //   \s+(?!\S)  : the whole run when it reaches the end of the text,
    //                otherwise the run minus its last code point (which is
    //                then followed by whitespace), if that leaves one.
    //   \s+        : the whole run (a single space before non-space).
    size_t run_end = pos;
    size_t last_crlf_end = 0;
    size_t last_start = pos;
    int num_code_points = 0;
    while (run_end < size_) {
      const Cp s = At(run_end);
      if (!(s.cls & kClassSpace)) break;
      last_start = run_end;
      run_end += s.len;
      ++num_code_points;
      if (s.cls & kClassCrLf) last_crlf_end = run_end;
    }
    if (last_crlf_end != 0) return last_crlf_end;
    if (run_end == size_) return run_end;
    if (num_code_points >= 2) return last_start;
    return run_end;
  }

  void Split(std::vector<absl::string_view>* pieces) const {
    const char* base = reinterpret_cast<const char*>(data_);
    size_t pos = 0;
    size_t gap_start = SIZE_MAX;
    while (pos < size_) {
      const size_t end = MatchAt(pos);
      if (end == pos) {
        // No alternative matches here (not reachable with the Qwen patterns,
        // which cover every code point): an unmatched gap, as Split keeps.
        if (gap_start == SIZE_MAX) gap_start = pos;
        pos += At(pos).len;
        continue;
      }
      if (gap_start != SIZE_MAX) {
        pieces->emplace_back(base + gap_start, pos - gap_start);
        gap_start = SIZE_MAX;
      }
      pieces->emplace_back(base + pos, end - pos);
      pos = end;
    }
    if (gap_start != SIZE_MAX) {
      pieces->emplace_back(base + gap_start, size_ - gap_start);
    }
  }

 private:
  const uint8_t* data_;
  size_t size_;
  bool marks_join_letters_;
};

}  // namespace

absl::Status QwenPreTokenizer::Split(
    absl::string_view text, std::vector<absl::string_view>* pieces) const {
  Scanner(text, variant_ == Variant::kQwen35).Split(pieces);
  return absl::OkStatus();
}

}  // namespace tributary
