// A linear-time scanner equivalent to the Qwen pre-tokenizer regexes
//   Qwen2/3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//             ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen3.5:  the same with [\p{L}\p{M}]+ for the letter run and \p{M}
//             excluded from the punctuation class,
// under Oniguruma's semantics (leftmost-first alternation, greedy
// quantifiers with backtracking, \s = White_Space, (?i) with Unicode simple
// case folding). How each alternative's backtracking reduces to a direct
// rule is explained in the .cc file. Tested against Pcre2PreTokenizer.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_QWEN_PRE_TOKENIZER_H_
#define TRIBUTARY_ENGINE_TOKENIZER_QWEN_PRE_TOKENIZER_H_

#include "engine/tokenizer/pre_tokenizer.h"

namespace tributary {

class QwenPreTokenizer : public PreTokenizer {
 public:
  enum class Variant { kQwen2, kQwen35 };
  explicit QwenPreTokenizer(Variant variant) : variant_(variant) {}

  // Never fails. Cost: O(text.size()), no allocation besides `pieces`.
  absl::Status Split(absl::string_view text,
                     std::vector<absl::string_view>* pieces) const override;
  const char* name() const override {
    return variant_ == Variant::kQwen2 ? "qwen2-scanner" : "qwen35-scanner";
  }

 private:
  Variant variant_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_QWEN_PRE_TOKENIZER_H_
