// The properties a tokenizer must keep on any input, checked by the
// tokenizer fuzzer (tests/fuzz/tokenizer_fuzzer.cc) and, over its committed
// seed corpus, by an ordinary test (tests/engine/tokenizer/
// tokenizer_corpus_test.cc). An input is one selector byte, then:
//   even selector: text. Ill-formed UTF-8 must be refused with
//     InvalidArgument; any other text must encode to known ids and decode
//     back to itself when it is in NFC and holds no added token's content
//     (added tokens are cut out before normalisation, and an NFC normaliser
//     changes other text).
//   odd selector: token ids, 3 bytes each (little-endian, modulo a few past
//     the last id): an unknown id must be NotFound; known ids must decode
//     (bit 1 of the selector: skipping special tokens).
// In both, StreamDecoder fed the ids one at a time must emit only whole
// UTF-8 and, with Finish(), the text Decode gives.
#ifndef TRIBUTARY_TESTS_FUZZ_TOKENIZER_PROPERTIES_H_
#define TRIBUTARY_TESTS_FUZZ_TOKENIZER_PROPERTIES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace tributary {

class TokenizerProperties {
 public:
  // `tokenizer` must outlive this.
  explicit TokenizerProperties(const Tokenizer& tokenizer);

  // "" when the input keeps every property, else what broke.
  std::string Check(const uint8_t* data, size_t size) const;

 private:
  std::string CheckText(const std::string& text) const;
  std::string CheckIds(const std::vector<int32_t>& ids,
                       bool skip_special_tokens) const;
  // Decode and StreamDecoder agree on ids (all known).
  std::string CheckStreaming(const std::vector<int32_t>& ids,
                             bool skip_special_tokens) const;

  const Tokenizer& tokenizer_;
  std::vector<std::string> added_contents_;
};

}  // namespace tributary

#endif  // TRIBUTARY_TESTS_FUZZ_TOKENIZER_PROPERTIES_H_
