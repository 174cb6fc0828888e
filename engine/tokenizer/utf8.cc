#include "engine/tokenizer/utf8.h"

#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "utf8proc.h"

namespace tributary {

Utf8Step NextUtf8(const uint8_t* data, size_t size) {
  const uint8_t b0 = data[0];
  if (b0 < 0x80) return {Utf8Step::kValid, 1, b0};
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Step::kInvalid, 1, 0};
  }
  for (int i = 1; i <= need; ++i) {
    if (static_cast<size_t>(i) >= size) return {Utf8Step::kIncomplete, i, 0};
    const uint8_t b = data[i];
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return {Utf8Step::kInvalid, i, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Step::kValid, need + 1, cp};
}

absl::Status ValidateUtf8(absl::string_view text) {
  const auto* data = reinterpret_cast<const uint8_t*>(text.data());
  size_t pos = 0;
  const size_t size = text.size();
  while (pos < size) {
    if (data[pos] < 0x80) {
      ++pos;
      continue;
    }
    Utf8Step step = NextUtf8(data + pos, size - pos);
    if (step.kind != Utf8Step::kValid) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input is not valid UTF-8: ",
          step.kind == Utf8Step::kIncomplete ? "truncated" : "ill-formed",
          " sequence at byte offset ", pos));
    }
    pos += step.num_bytes;
  }
  return absl::OkStatus();
}

std::string Utf8Excerpt(absl::string_view text, size_t max_bytes) {
  std::string out;
  // Not final: a valid but unfinished sequence at the cut is dropped.
  (void)AppendUtf8Lossy(text.substr(0, max_bytes), /*final=*/max_bytes >= text.size(), &out);
  return out;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t AppendUtf8Lossy(absl::string_view bytes, bool final, std::string* out) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t size = bytes.size();
  size_t pos = 0;
  while (pos < size) {
    if (data[pos] < 0x80) {
      out->push_back(static_cast<char>(data[pos++]));
      continue;
    }
    Utf8Step step = NextUtf8(data + pos, size - pos);
    if (step.kind == Utf8Step::kValid) {
      out->append(bytes.data() + pos, step.num_bytes);
    } else if (step.kind == Utf8Step::kInvalid || final) {
      out->append("\xEF\xBF\xBD");
    } else {
      break;  // incomplete: wait for more bytes
    }
    pos += step.num_bytes;
  }
  return pos;
}

namespace {

absl::StatusOr<std::string> Utf8procNfc(absl::string_view text) {
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t length = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &result,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result,
                                                                &std::free);
  if (length < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NFC normalization failed: ", utf8proc_errmsg(length)));
  }
  return std::string(reinterpret_cast<const char*>(result),
                     static_cast<size_t>(length));
}

// U+11A7 (HANGUL JUNGSEONG O-YAE) is TBase, which the Hangul composition
// rule excludes (TIndex must be > 0), but utf8proc 2.8 composes an LV
// syllable followed by it into the same syllable, dropping it. U+11A7 is a
// starter that composes with nothing, so NFC of the text is the NFC of the
// parts around it, joined by it.
constexpr absl::string_view kTBase = "\xE1\x86\xA7";

}  // namespace

absl::StatusOr<std::string> NormalizeNfc(absl::string_view text) {
  if (text.find(kTBase) != absl::string_view::npos) {
    std::string out;
    size_t pos = 0;
    while (true) {
      const size_t at = text.find(kTBase, pos);
      auto part = NormalizeNfc(text.substr(
          pos, at == absl::string_view::npos ? absl::string_view::npos
                                             : at - pos));
      if (!part.ok()) return part.status();
      out += *part;
      if (at == absl::string_view::npos) return out;
      out.append(kTBase.data(), kTBase.size());
      pos = at + kTBase.size();
    }
  }
  bool ascii = true;
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii || text.empty()) return std::string(text);
  return Utf8procNfc(text);
}

}  // namespace tributary
