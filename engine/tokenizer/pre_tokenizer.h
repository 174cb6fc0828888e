// The regex split step of a byte-level BPE tokenizer: HF's
// `Split(Regex(pattern), behavior="Isolated", invert=false)`, i.e. the text
// is cut into the successive leftmost-first matches of the pattern and the
// (rare) unmatched gaps between them, each a piece of its own.
//
// Two implementations:
//   - QwenPreTokenizer: a hand-written linear-time scanner for the two Qwen
//     patterns (Qwen2/Qwen3 and Qwen3.5), the fast path;
//   - Pcre2PreTokenizer: any other pattern, through PCRE2 (JIT when
//     available, bounded by a match limit). It is also the scanner's naive
//     twin in the tests.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
#define TRIBUTARY_ENGINE_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

// The Qwen2/Qwen2.5/Qwen3 pattern and the Qwen3.5 one (letters may carry
// combining marks), exactly as they appear in tokenizer.json.
extern const char kQwen2Pattern[];
extern const char kQwen35Pattern[];
// GPT-2's pattern, used by ByteLevel(use_regex=true).
extern const char kGpt2Pattern[];

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;

  // Appends the pieces of `text` (valid UTF-8) to `pieces`, as views into
  // `text`, in order; their concatenation is `text`. Thread-safe.
  virtual absl::Status Split(absl::string_view text,
                             std::vector<absl::string_view>* pieces) const = 0;

  // A short name for logs and tests ("qwen2-scanner", "pcre2").
  virtual const char* name() const = 0;

  // The scanner for the two Qwen patterns, PCRE2 for any other pattern.
  // Errors (a pattern PCRE2 rejects) name the pattern and the reason.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> ForPattern(
      absl::string_view pattern);
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
