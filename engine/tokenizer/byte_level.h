// The GPT-2 byte-level alphabet: each of the 256 byte values is shown as one
// printable code point (printable Latin-1 bytes as themselves, the others as
// U+0100 + n), so that BPE vocabularies are strings. Used by the
// ByteLevel pre-tokenizer (bytes -> characters) and decoder (back).
#ifndef TRIBUTARY_ENGINE_TOKENIZER_BYTE_LEVEL_H_
#define TRIBUTARY_ENGINE_TOKENIZER_BYTE_LEVEL_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tributary {

class ByteLevelAlphabet {
 public:
  // The immutable table (built once, thread-safe).
  static const ByteLevelAlphabet& Get();

  char32_t ByteToChar(uint8_t byte) const { return byte_to_char_[byte]; }
  // The UTF-8 form of ByteToChar(byte).
  const std::string& ByteToUtf8(uint8_t byte) const {
    return byte_to_utf8_[byte];
  }
  // The byte shown as `c`, or -1 when `c` is not in the alphabet.
  int CharToByte(char32_t c) const {
    return c < char_to_byte_.size() ? char_to_byte_[c] : -1;
  }

  // The byte-level string of raw bytes (e.g. " the" -> "Ġthe").
  std::string Encode(absl::string_view bytes) const;
  // The raw bytes of a byte-level token, or nullopt when some character is
  // not in the alphabet (HF's decoder then keeps the token's UTF-8 as is).
  std::optional<std::string> Decode(absl::string_view token) const;

 private:
  ByteLevelAlphabet();
  std::array<char32_t, 256> byte_to_char_{};
  std::array<std::string, 256> byte_to_utf8_;
  std::array<int16_t, 512> char_to_byte_{};
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_BYTE_LEVEL_H_
