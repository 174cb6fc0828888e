#include "engine/tokenizer/unicode_class.h"

#include <array>

#include "utf8proc.h"

namespace tributary {
namespace {

uint8_t SlowClass(char32_t cp) {
  uint8_t cls = 0;
  if (IsWhiteSpace(cp)) cls |= kClassSpace;
  if (cp == '\r' || cp == '\n') cls |= kClassCrLf;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      cls |= kClassLetter;
      break;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      cls |= kClassMark;
      break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      cls |= kClassNumber;
      break;
    default:
      break;
  }
  return cls;
}

std::array<uint8_t, 128> MakeAsciiTable() {
  std::array<uint8_t, 128> table{};
  for (char32_t cp = 0; cp < 128; ++cp) table[cp] = SlowClass(cp);
  return table;
}

}  // namespace

bool IsWhiteSpace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint8_t CodePointClass(char32_t cp) {
  static const std::array<uint8_t, 128> kAscii = MakeAsciiTable();
  if (cp < 128) return kAscii[cp];
  return SlowClass(cp);
}

}  // namespace tributary
