// Incremental detokenization for streaming: tokens go in one at a time and
// only complete UTF-8 characters come out. A character split across tokens
// (an emoji of several byte-level tokens) is held back until its last byte
// arrives; bytes that can never form a character come out as U+FFFD at
// once. Finish() flushes a trailing incomplete sequence as U+FFFD. The
// chunks concatenated equal Tokenizer::Decode of all the ids.
//
// Not thread-safe (one per stream); the Tokenizer must outlive it.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_STREAM_DECODER_H_
#define TRIBUTARY_ENGINE_TOKENIZER_STREAM_DECODER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace tributary {

class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // The text completed by `id` (possibly ""). NotFound for an unknown id,
  // which leaves the decoder as it was.
  absl::StatusOr<std::string> Add(int32_t id);
  // What remains, with an unfinished character as U+FFFD; resets.
  std::string Finish();
  // Bytes held back (0..3).
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_STREAM_DECODER_H_
