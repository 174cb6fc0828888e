#include "engine/tokenizer/stream_decoder.h"

#include "engine/tokenizer/utf8.h"

namespace tributary {

absl::StatusOr<std::string> StreamDecoder::Add(int32_t id) {
  auto bytes = tokenizer_.TokenBytes(id, skip_special_tokens_);
  if (!bytes.ok()) return bytes.status();
  pending_.append(bytes->data(), bytes->size());
  std::string out;
  const size_t consumed = AppendUtf8Lossy(pending_, /*final=*/false, &out);
  pending_.erase(0, consumed);
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out;
  AppendUtf8Lossy(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace tributary
