// A byte-level BPE tokenizer of the Qwen family, loaded from HF
// `tokenizer.json` (+ `tokenizer_config.json` for eos/pad and the chat
// template). Encoding reproduces HF tokenizers (split_special_tokens=false,
// no BOS): added tokens are cut out of the raw text, the rest is NFC
// normalized, split by the pre-tokenizer regex, mapped to byte-level
// characters and merged by BPE. Decoding is HF's ByteLevel decoder with
// invalid UTF-8 replaced by U+FFFD.
//
// Thread safety: immutable after Load(); Encode/Decode may run concurrently.
// Encode keeps a bounded per-thread cache of word -> ids for the tokenizer
// it last served on that thread (a cache hit skips BPE; it never changes a
// result).
#ifndef TRIBUTARY_ENGINE_TOKENIZER_TOKENIZER_H_
#define TRIBUTARY_ENGINE_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/tokenizer/added_vocabulary.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer_json.h"

namespace tributary {

class Tokenizer {
 public:
  // `path`: a tokenizer.json file, or a directory that holds one. A
  // tokenizer_config.json (and chat_template.jinja) in the same directory is
  // read when present. Errors name the file and the reason.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(
      const std::string& path);
  // Builds from a parsed spec (tests build specs in memory).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);

  // Token ids of `text`. InvalidArgument when `text` is not valid UTF-8.
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const;

  // The text of `ids`; special tokens (special=true added tokens) are left
  // out with `skip_special_tokens`. NotFound naming the id for an unknown id.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens = false) const;

  // The raw bytes token `id` decodes to ("" when skipped), which may be part
  // of a UTF-8 character. NotFound for an unknown id.
  absl::StatusOr<absl::string_view> TokenBytes(int32_t id,
                                               bool skip_special_tokens) const;

  // Renders and encodes a conversation (see chat_template.h).
  absl::StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages,
                                         const ChatOptions& options) const {
    return chat_template_.Render(messages, options);
  }
  absl::StatusOr<std::vector<int32_t>> EncodeChat(
      const std::vector<ChatMessage>& messages, const ChatOptions& options) const;
  const ChatTemplate& chat_template() const { return chat_template_; }

  // Token string <-> id (added tokens by content, BPE tokens in their
  // byte-level form, e.g. "Ġthe").
  std::optional<int32_t> TokenToId(absl::string_view token) const;
  std::optional<std::string> IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  bool IsAddedToken(int32_t id) const;
  // One past the largest id (model or added token).
  int32_t id_end() const { return id_end_; }

  // From tokenizer_config.json; nullopt when absent.
  std::optional<int32_t> eos_token_id() const { return eos_token_id_; }
  std::optional<int32_t> pad_token_id() const { return pad_token_id_; }

  const PreTokenizer& pre_tokenizer() const { return *pre_tokenizer_; }
  const BpeModel& model() const { return model_; }
  const std::string& source() const { return source_; }

 private:
  Tokenizer(BpeModel model, AddedVocabulary added,
            std::unique_ptr<PreTokenizer> pre_tokenizer, ChatTemplate chat);
  // Appends the ids of a text without added tokens (normalized already).
  absl::Status EncodePlain(absl::string_view text,
                           std::vector<int32_t>* ids) const;
  absl::Status EncodeSegment(absl::string_view text,
                             std::vector<int32_t>* ids) const;

  BpeModel model_;
  AddedVocabulary added_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  ChatTemplate chat_template_;
  bool nfc_ = false;
  std::string source_;
  uint64_t serial_ = 0;  // identifies this tokenizer in the thread caches
  int32_t id_end_ = 0;
  // decoded_[id]: the bytes of each id; decoded_valid_[id]: whether id exists.
  std::vector<std::string> decoded_;
  std::vector<bool> exists_;
  std::vector<bool> special_;
  std::optional<int32_t> eos_token_id_;
  std::optional<int32_t> pad_token_id_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_TOKENIZER_H_
