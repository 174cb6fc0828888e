#include "engine/tokenizer/pcre2_pre_tokenizer.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace tributary {
namespace {

// Bounds the backtracking work of one match (PCRE2 counts calls of its
// internal match function); generous for pre-tokenizer patterns, which are
// linear on ordinary text.
constexpr uint32_t kMatchLimit = 10'000'000;
constexpr uint32_t kDepthLimit = 100'000;

// The White_Space property, which is Oniguruma's \s. PCRE2's own \s under
// PCRE2_UCP also matches U+180E (a format character since Unicode 6.3).
constexpr char kWhiteSpace[] =
    "\\t\\n\\x{0b}\\f\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
    "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}";

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return std::string(reinterpret_cast<const char*>(buffer));
}

}  // namespace

struct Pcre2PreTokenizer::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  ~Impl() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

Pcre2PreTokenizer::Pcre2PreTokenizer(std::unique_ptr<Impl> impl, bool jit)
    : impl_(std::move(impl)), jit_(jit) {}
Pcre2PreTokenizer::~Pcre2PreTokenizer() = default;

absl::StatusOr<std::string> Pcre2PreTokenizer::RewritePattern(
    absl::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? kWhiteSpace : absl::StrCat("[", kWhiteSpace, "]");
      } else if (e == 'S') {
        if (in_class) {
          return absl::UnimplementedError(absl::StrCat(
              "pre-tokenizer regex '", pattern,
              "': \\S inside a character class is not supported"));
        }
        out += absl::StrCat("[^", kWhiteSpace, "]");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      size_t close = pattern.find(":]", i + 2);
      if (close != absl::string_view::npos) {
        out.append(pattern.data() + i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Pcre2PreTokenizer>> Pcre2PreTokenizer::Create(
    absl::string_view pattern) {
  auto rewritten = RewritePattern(pattern);
  if (!rewritten.ok()) return rewritten.status();
  auto impl = std::make_unique<Impl>();
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  impl->code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(rewritten->data()), rewritten->size(),
      PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (impl->code == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pre-tokenizer regex '", pattern, "' does not compile (PCRE2, offset ",
        error_offset, " of the rewritten pattern): ",
        Pcre2Message(error_code)));
  }
  const bool jit = pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE) == 0;
  impl->context = pcre2_match_context_create(nullptr);
  if (impl->context == nullptr) {
    return absl::ResourceExhaustedError("PCRE2: cannot allocate a context");
  }
  pcre2_set_match_limit(impl->context, kMatchLimit);
  pcre2_set_depth_limit(impl->context, kDepthLimit);
  return std::unique_ptr<Pcre2PreTokenizer>(
      new Pcre2PreTokenizer(std::move(impl), jit));
}

absl::Status Pcre2PreTokenizer::Split(
    absl::string_view text, std::vector<absl::string_view>* pieces) const {
  pcre2_match_data* match =
      pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (match == nullptr) {
    return absl::ResourceExhaustedError("PCRE2: cannot allocate match data");
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  size_t emitted = 0;  // end of the last piece
  absl::Status status;
  while (pos < text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, match,
                         impl_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      status = rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT
                   ? absl::ResourceExhaustedError(absl::StrCat(
                         "pre-tokenizer regex hit its match limit at byte ",
                         pos, ": ", Pcre2Message(rc)))
                   : absl::InvalidArgumentError(absl::StrCat(
                         "pre-tokenizer regex failed at byte ", pos, ": ",
                         Pcre2Message(rc)));
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (end == start) {
      // An empty match yields no piece; move on by one code point.
      pos = start + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) {
        ++pos;
      }
      continue;
    }
    if (start > emitted) pieces->push_back(text.substr(emitted, start - emitted));
    pieces->push_back(text.substr(start, end - start));
    emitted = end;
    pos = end;
  }
  if (status.ok() && emitted < text.size()) {
    pieces->push_back(text.substr(emitted));
  }
  pcre2_match_data_free(match);
  return status;
}

}  // namespace tributary
