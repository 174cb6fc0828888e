#include "engine/tokenizer/byte_level.h"

#include "engine/tokenizer/utf8.h"

namespace tributary {

const ByteLevelAlphabet& ByteLevelAlphabet::Get() {
  static const ByteLevelAlphabet* const kAlphabet = new ByteLevelAlphabet();
  return *kAlphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  char_to_byte_.fill(-1);
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                           (b >= 0xAE && b <= 0xFF);
    const char32_t c = printable ? static_cast<char32_t>(b)
                                 : static_cast<char32_t>(256 + next++);
    byte_to_char_[b] = c;
    char_to_byte_[c] = static_cast<int16_t>(b);
    AppendUtf8(c, &byte_to_utf8_[b]);
  }
}

std::string ByteLevelAlphabet::Encode(absl::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byte_to_utf8_[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> ByteLevelAlphabet::Decode(
    absl::string_view token) const {
  std::string out;
  const auto* data = reinterpret_cast<const uint8_t*>(token.data());
  size_t pos = 0;
  while (pos < token.size()) {
    Utf8Step step = NextUtf8(data + pos, token.size() - pos);
    if (step.kind != Utf8Step::kValid) return std::nullopt;
    int b = CharToByte(step.code_point);
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
    pos += step.num_bytes;
  }
  return out;
}

}  // namespace tributary
