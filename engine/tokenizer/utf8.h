// UTF-8 helpers shared by the tokenizer: validation, code-point decoding,
// lossy decoding (the Unicode "maximal subpart" rule, as Rust's
// String::from_utf8_lossy and Python's errors="replace" do) and NFC.
//
// All functions are pure and thread-safe.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_UTF8_H_
#define TRIBUTARY_ENGINE_TOKENIZER_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

// The result of looking at the bytes at one position.
struct Utf8Step {
  enum Kind { kValid, kInvalid, kIncomplete };
  Kind kind;
  // kValid: length of the sequence (1..4). kInvalid: length of the maximal
  // subpart to replace by one U+FFFD (>= 1). kIncomplete: the number of bytes
  // (all remaining) that form a valid but unfinished prefix.
  int num_bytes;
  char32_t code_point;  // only for kValid
};

// Classifies the sequence starting at data[0]; `size` > 0.
Utf8Step NextUtf8(const uint8_t* data, size_t size);

// OK when `text` is well-formed UTF-8; otherwise InvalidArgument naming the
// byte offset of the first ill-formed sequence.
absl::Status ValidateUtf8(absl::string_view text);

void AppendUtf8(char32_t code_point, std::string* out);

// Appends the characters of `bytes` to `out`, each ill-formed subsequence
// replaced by U+FFFD. With `final` false, a valid but unfinished sequence at
// the end is not consumed. Returns the number of bytes consumed.
size_t AppendUtf8Lossy(absl::string_view bytes, bool final, std::string* out);

// An excerpt of `text` to quote in a message: its first max_bytes bytes,
// less a character cut at the end, each ill-formed subsequence replaced by
// U+FFFD, so that the message stays well-formed UTF-8 whatever the client
// sent (a plain substr can cut a character in two).
std::string Utf8Excerpt(absl::string_view text, size_t max_bytes);

// NFC of valid UTF-8 text (utf8proc). ASCII-only text is returned unchanged
// without calling utf8proc.
absl::StatusOr<std::string> NormalizeNfc(absl::string_view text);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_UTF8_H_
