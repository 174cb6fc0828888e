// The added tokens of a tokenizer (tokenizer.json `added_tokens`): special
// tokens such as <|im_end|> and plain added tokens such as <think>. As in HF
// tokenizers (split_special_tokens=false) they are cut out of the text
// before normalization and pre-tokenization: first the tokens with
// normalized=false on the raw text, then those with normalized=true on the
// NFC of each remaining piece. Matching is leftmost-longest (HF uses
// Aho-Corasick with MatchKind::LeftmostLongest), and honours each token's
// flags as HF's AddedVocabulary::find_matches does:
//   single_word: the match is dropped (and the scan moves past it) unless
//                neither neighbour is alphanumeric (approximated here by
//                \p{L}|\p{N}; Rust's is_alphanumeric also counts the
//                Other_Alphabetic marks);
//   lstrip/rstrip: the whitespace before/after the match joins the token.
//
// Immutable after Create(); thread-safe.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_ADDED_VOCABULARY_H_
#define TRIBUTARY_ENGINE_TOKENIZER_ADDED_VOCABULARY_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

class AddedVocabulary {
 public:
  // A cut of a text: bytes [begin, end) are either the added token `id` or
  // (id < 0) ordinary text.
  struct Segment {
    size_t begin;
    size_t end;
    int32_t id;
  };

  // `normalize` maps a normalized=true token's content to the form it is
  // matched in (NFC); pass contents already normalized. Errors: an empty
  // content, an id used twice.
  static absl::StatusOr<AddedVocabulary> Create(
      std::vector<AddedToken> tokens,
      const std::vector<std::string>& normalized_contents,
      absl::string_view source);

  // Cuts `text` by the tokens with normalized == `normalized`, appending
  // segments in order (nothing for an empty text).
  void Split(absl::string_view text, bool normalized,
             std::vector<Segment>* segments) const;
  bool HasTokens(bool normalized) const {
    return !matchers_[normalized ? 1 : 0].patterns.empty();
  }

  const AddedToken* FindById(int32_t id) const;
  const AddedToken* FindByContent(absl::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Matcher {
    // patterns[k] = (text, token index); by_first_byte[b] lists the
    // patterns starting with byte b, longest first.
    std::vector<std::pair<std::string, size_t>> patterns;
    std::array<std::vector<uint32_t>, 256> by_first_byte;
  };
  AddedVocabulary() = default;
  void BuildMatcher(Matcher* matcher);

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<int32_t, size_t> by_id_;
  absl::flat_hash_map<std::string, size_t> by_content_;
  std::array<Matcher, 2> matchers_;  // [0]: raw text, [1]: normalized text
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_ADDED_VOCABULARY_H_
