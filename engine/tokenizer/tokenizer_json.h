// Parsing of HF `tokenizer.json` and `tokenizer_config.json` into a plain
// description (TokenizerSpec) that Tokenizer::Create validates and builds.
//
// Supported tokenizer.json (byte-level BPE of the GPT-2/Qwen family):
//   normalizer     null | NFC | Sequence[] of those
//   pre_tokenizer  Sequence[Split(Regex, Isolated, invert=false),
//                  ByteLevel(add_prefix_space=false, use_regex=false)]
//                  | ByteLevel(add_prefix_space=false, use_regex=true)
//   model          BPE, no dropout, no subword prefix/suffix, no
//                  byte_fallback; merges as ["a","b"] pairs or "a b" strings
//   post_processor null | ByteLevel       decoder  ByteLevel
//   truncation, padding: null
// Anything else is an Unimplemented/InvalidArgument error that names the
// field. JSON is parsed without exceptions.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_TOKENIZER_JSON_H_
#define TRIBUTARY_ENGINE_TOKENIZER_TOKENIZER_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tokenizer/added_vocabulary.h"
#include "engine/tokenizer/bpe_model.h"

namespace tributary {

struct TokenizerSpec {
  std::string source;  // the file, for error messages
  bool nfc = false;
  std::string split_pattern;  // the pre-tokenizer regex
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  BpeModel::Options bpe_options;
  std::vector<AddedToken> added_tokens;

  // From tokenizer_config.json (all optional).
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> bos_token;
  std::string chat_template;  // the Jinja text, "" when none
};

// Parses tokenizer.json text. `source` names the file in errors.
absl::StatusOr<TokenizerSpec> ParseTokenizerJson(absl::string_view json_text,
                                                 absl::string_view source);

// Adds the fields of tokenizer_config.json text to `spec`.
absl::Status ParseTokenizerConfig(absl::string_view json_text,
                                  absl::string_view source,
                                  TokenizerSpec* spec);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_TOKENIZER_JSON_H_
