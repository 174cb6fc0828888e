#include "engine/tokenizer/pre_tokenizer.h"

#include "engine/tokenizer/pcre2_pre_tokenizer.h"
#include "engine/tokenizer/qwen_pre_tokenizer.h"

namespace tributary {

const char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char kQwen35Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::ForPattern(
    absl::string_view pattern) {
  if (pattern == kQwen2Pattern) {
    return std::unique_ptr<PreTokenizer>(
        new QwenPreTokenizer(QwenPreTokenizer::Variant::kQwen2));
  }
  if (pattern == kQwen35Pattern) {
    return std::unique_ptr<PreTokenizer>(
        new QwenPreTokenizer(QwenPreTokenizer::Variant::kQwen35));
  }
  auto pcre = Pcre2PreTokenizer::Create(pattern);
  if (!pcre.ok()) return pcre.status();
  return std::unique_ptr<PreTokenizer>(std::move(pcre).value());
}

}  // namespace tributary
