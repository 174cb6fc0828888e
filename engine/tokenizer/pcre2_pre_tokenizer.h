// Split(Regex) through PCRE2, for patterns the hand-written scanner does not
// know, and as the scanner's naive twin in the tests.
//
// The pattern is compiled with PCRE2_UTF | PCRE2_UCP. One rewrite makes
// PCRE2 agree with Oniguruma: PCRE2's `\s` under PCRE2_UCP also matches
// U+180E MONGOLIAN VOWEL SEPARATOR (no longer White_Space since Unicode
// 6.3), so `\s` and `\S` are spelled out as the White_Space list. A match
// limit bounds the work on adversarial input; hitting it is a
// ResourceExhausted error.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_PCRE2_PRE_TOKENIZER_H_
#define TRIBUTARY_ENGINE_TOKENIZER_PCRE2_PRE_TOKENIZER_H_

#include <memory>
#include <string>

#include "engine/tokenizer/pre_tokenizer.h"

namespace tributary {

class Pcre2PreTokenizer : public PreTokenizer {
 public:
  // Compiles `pattern` (Oniguruma/PCRE syntax). Errors name the pattern,
  // the offset and PCRE2's reason.
  static absl::StatusOr<std::unique_ptr<Pcre2PreTokenizer>> Create(
      absl::string_view pattern);
  ~Pcre2PreTokenizer() override;

  // Thread-safe (match data is per call).
  absl::Status Split(absl::string_view text,
                     std::vector<absl::string_view>* pieces) const override;
  const char* name() const override { return "pcre2"; }
  bool jit() const { return jit_; }

  // The pattern PCRE2 compiles (after the \s rewrite); for tests.
  static absl::StatusOr<std::string> RewritePattern(absl::string_view pattern);

 private:
  struct Impl;
  explicit Pcre2PreTokenizer(std::unique_ptr<Impl> impl, bool jit);
  std::unique_ptr<Impl> impl_;
  bool jit_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_PCRE2_PRE_TOKENIZER_H_
