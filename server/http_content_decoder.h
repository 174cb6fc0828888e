// Undoes a request body's Content-Encoding (RFC 9110 §8.4): gzip, deflate
// (zlib-wrapped, or raw as some clients send it), br, identity, or a list of
// them applied in order. Bounded: decoding stops as soon as the output
// would pass `max_bytes`, so a small compressed body cannot expand into an
// unbounded one.
#ifndef TRIBUTARY_SERVER_HTTP_CONTENT_DECODER_H_
#define TRIBUTARY_SERVER_HTTP_CONTENT_DECODER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

// OK when every coding of `content_encoding` (a header value) is one
// DecodeContent undoes; otherwise UNIMPLEMENTED naming the first that is
// not. An empty value is identity.
absl::Status CheckContentEncoding(absl::string_view content_encoding);

// The decoded body. Errors: UNIMPLEMENTED (CheckContentEncoding's),
// INVALID_ARGUMENT naming the coding whose data is corrupt or truncated,
// RESOURCE_EXHAUSTED when the decoded body would be over `max_bytes`.
absl::StatusOr<std::string> DecodeContent(absl::string_view content_encoding,
                                          std::string body, int64_t max_bytes);

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HTTP_CONTENT_DECODER_H_
