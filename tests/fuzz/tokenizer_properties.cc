#include "tests/fuzz/tokenizer_properties.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/stream_decoder.h"
#include "engine/tokenizer/utf8.h"

namespace tributary {

TokenizerProperties::TokenizerProperties(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer) {
  for (int32_t id = 0; id < tokenizer.id_end(); ++id) {
    if (!tokenizer.IsAddedToken(id)) continue;
    std::optional<std::string> content = tokenizer.IdToToken(id);
    if (content && !content->empty()) added_contents_.push_back(*content);
  }
}

std::string TokenizerProperties::Check(const uint8_t* data, size_t size) const {
  if (size == 0) return "";
  const uint8_t selector = data[0];
  ++data;
  --size;
  if (selector % 2 == 0) {
    return CheckText(std::string(reinterpret_cast<const char*>(data), size));
  }
  const int64_t id_range = int64_t{tokenizer_.id_end()} + 4;
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 3 <= size; i += 3) {
    const int64_t value = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16);
    ids.push_back(static_cast<int32_t>(value % id_range));
  }
  return CheckIds(ids, (selector & 2) != 0);
}

std::string TokenizerProperties::CheckText(const std::string& text) const {
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer_.Encode(text);
  if (!ValidateUtf8(text).ok()) {
    if (ids.ok()) return "ill-formed UTF-8 was encoded";
    if (!absl::IsInvalidArgument(ids.status())) {
      return absl::StrCat("ill-formed UTF-8 refused with ", ids.status().ToString());
    }
    return "";
  }
  if (!ids.ok()) return absl::StrCat("valid text refused: ", ids.status().ToString());
  for (int32_t id : *ids) {
    if (id < 0 || id >= tokenizer_.id_end()) return absl::StrCat("id ", id, " out of range");
  }
  absl::StatusOr<std::string> decoded = tokenizer_.Decode(*ids);
  if (!decoded.ok()) return absl::StrCat("Decode(Encode): ", decoded.status().ToString());
  bool has_added = false;
  for (const std::string& content : added_contents_) {
    if (text.find(content) != std::string::npos) has_added = true;
  }
  absl::StatusOr<std::string> nfc = NormalizeNfc(text);
  if (!has_added && nfc.ok() && *nfc == text && *decoded != text) {
    return absl::StrCat("Decode(Encode(text)) != text: ", decoded->size(),
                        " bytes against ", text.size());
  }
  return CheckStreaming(*ids, /*skip_special_tokens=*/false);
}

std::string TokenizerProperties::CheckIds(const std::vector<int32_t>& ids,
                                          bool skip_special_tokens) const {
  bool unknown = false;
  for (int32_t id : ids) unknown = unknown || id >= tokenizer_.id_end();
  absl::StatusOr<std::string> decoded = tokenizer_.Decode(ids, skip_special_tokens);
  if (unknown) {
    if (decoded.ok()) return "an unknown id was decoded";
    if (!absl::IsNotFound(decoded.status())) {
      return absl::StrCat("unknown id refused with ", decoded.status().ToString());
    }
    return "";
  }
  if (!decoded.ok()) return absl::StrCat("Decode: ", decoded.status().ToString());
  if (!ValidateUtf8(*decoded).ok()) return "Decode gave ill-formed UTF-8";
  return CheckStreaming(ids, skip_special_tokens);
}

std::string TokenizerProperties::CheckStreaming(const std::vector<int32_t>& ids,
                                                bool skip_special_tokens) const {
  absl::StatusOr<std::string> decoded = tokenizer_.Decode(ids, skip_special_tokens);
  if (!decoded.ok()) return absl::StrCat("Decode: ", decoded.status().ToString());
  StreamDecoder stream(tokenizer_, skip_special_tokens);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<std::string> chunk = stream.Add(ids[i]);
    if (!chunk.ok()) return absl::StrCat("StreamDecoder::Add: ", chunk.status().ToString());
    if (!ValidateUtf8(*chunk).ok()) {
      return absl::StrCat("StreamDecoder emitted ill-formed UTF-8 at id ", i);
    }
    streamed += *chunk;
  }
  const std::string rest = stream.Finish();
  if (!ValidateUtf8(rest).ok()) return "StreamDecoder::Finish gave ill-formed UTF-8";
  streamed += rest;
  if (streamed != *decoded) {
    return absl::StrCat("streamed text (", streamed.size(),
                        " bytes) differs from Decode (", decoded->size(), ")");
  }
  return "";
}

}  // namespace tributary
