// Per-code-point classes used by the pre-tokenizer scanner and by the added
// token matcher: general category groups from utf8proc (Unicode 15 in
// Debian 12) and the White_Space property, which is what `\s` means in
// Oniguruma (the regex engine of HF tokenizers) and in Rust's regex crate.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_UNICODE_CLASS_H_
#define TRIBUTARY_ENGINE_TOKENIZER_UNICODE_CLASS_H_

#include <cstdint>

namespace tributary {

enum CodePointClassBit : uint8_t {
  kClassLetter = 1,   // \p{L}
  kClassNumber = 2,   // \p{N}
  kClassMark = 4,     // \p{M}
  kClassSpace = 8,    // \s: White_Space (includes U+0085, excludes U+200B)
  kClassCrLf = 16,    // [\r\n]
};

// The class bits of `code_point`. Cost: a table lookup for ASCII, one
// utf8proc_category call otherwise.
uint8_t CodePointClass(char32_t code_point);

// White_Space (Rust's char::is_whitespace).
bool IsWhiteSpace(char32_t code_point);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_UNICODE_CLASS_H_
