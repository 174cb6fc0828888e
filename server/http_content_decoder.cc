#include "server/http_content_decoder.h"

#include <brotli/decode.h>
#include <zlib.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tributary {
namespace {

enum class Coding { kIdentity, kGzip, kDeflate, kBrotli };

// Decoded output grows by this much at a time, and never past the limit.
constexpr size_t kChunkBytes = 64 << 10;

absl::StatusOr<std::vector<Coding>> ParseCodings(absl::string_view header) {
  std::vector<Coding> codings;
  for (absl::string_view part : absl::StrSplit(header, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty() || absl::EqualsIgnoreCase(part, "identity")) continue;
    if (absl::EqualsIgnoreCase(part, "gzip") ||
        absl::EqualsIgnoreCase(part, "x-gzip")) {
      codings.push_back(Coding::kGzip);
    } else if (absl::EqualsIgnoreCase(part, "deflate")) {
      codings.push_back(Coding::kDeflate);
    } else if (absl::EqualsIgnoreCase(part, "br")) {
      codings.push_back(Coding::kBrotli);
    } else {
      return absl::UnimplementedError(absl::StrCat(
          "Content-Encoding: ", part.substr(0, 32),
          " is not supported (identity, gzip, deflate or br)"));
    }
  }
  return codings;
}

absl::Status TooLarge(int64_t max_bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("the decoded body is larger than ", max_bytes, " bytes"));
}

// The decoded body as a decoder writes it: room is added kChunkBytes at a
// time and never more than one byte past the limit, so that a decoder which
// fills that byte has shown the body is too large.
class BoundedOutput {
 public:
  explicit BoundedOutput(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Room for the decoder's next call, or RESOURCE_EXHAUSTED once the body
  // holds max_bytes already.
  absl::Status Grow(char** next, size_t* room) {
    if (static_cast<int64_t>(bytes_.size()) >= max_bytes_) {
      return TooLarge(max_bytes_);
    }
    *room = std::min<size_t>(
        kChunkBytes, static_cast<size_t>(max_bytes_) - bytes_.size() + 1);
    const size_t used = bytes_.size();
    bytes_.resize(used + *room);
    *next = bytes_.data() + used;
    return absl::OkStatus();
  }
  // After the call: `unused` bytes of the room were not written.
  void Keep(size_t unused) { bytes_.resize(bytes_.size() - unused); }
  // The body, or RESOURCE_EXHAUSTED when the last call went past the limit.
  absl::StatusOr<std::string> Take() {
    if (static_cast<int64_t>(bytes_.size()) > max_bytes_) {
      return TooLarge(max_bytes_);
    }
    return std::move(bytes_);
  }

 private:
  const int64_t max_bytes_;
  std::string bytes_;
};

// zlib's inflate; `window_bits` picks the wrapper: 15 + 16 is gzip, 15 is
// zlib, -15 is raw deflate.
absl::StatusOr<std::string> Inflate(const std::string& in, int window_bits,
                                    int64_t max_bytes, const char* name) {
  z_stream z{};
  if (inflateInit2(&z, window_bits) != Z_OK) {
    return absl::InternalError("zlib could not start");
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  BoundedOutput out(max_bytes);
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    char* next = nullptr;
    size_t room = 0;
    if (absl::Status s = out.Grow(&next, &room); !s.ok()) return s;
    z.next_out = reinterpret_cast<Bytef*>(next);
    z.avail_out = static_cast<uInt>(room);
    rc = inflate(&z, Z_NO_FLUSH);
    out.Keep(z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // truncated
    if (rc != Z_OK && rc != Z_STREAM_END) break;
  }
  absl::StatusOr<std::string> body = out.Take();
  if (!body.ok()) return body.status();
  if (rc != Z_STREAM_END || z.avail_in != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the body is not valid Content-Encoding: ", name,
        " data (corrupt, truncated or followed by other bytes)"));
  }
  return body;
}

absl::StatusOr<std::string> Unbrotli(const std::string& in, int64_t max_bytes) {
  std::unique_ptr<BrotliDecoderState, void (*)(BrotliDecoderState*)> state(
      BrotliDecoderCreateInstance(nullptr, nullptr, nullptr),
      BrotliDecoderDestroyInstance);
  if (state == nullptr) return absl::InternalError("brotli could not start");
  const uint8_t* next_in = reinterpret_cast<const uint8_t*>(in.data());
  size_t avail_in = in.size();
  BoundedOutput out(max_bytes);
  BrotliDecoderResult rc = BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT;
  while (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) {
    char* next = nullptr;
    size_t avail_out = 0;
    if (absl::Status s = out.Grow(&next, &avail_out); !s.ok()) return s;
    uint8_t* next_out = reinterpret_cast<uint8_t*>(next);
    rc = BrotliDecoderDecompressStream(state.get(), &avail_in, &next_in,
                                       &avail_out, &next_out, nullptr);
    out.Keep(avail_out);
  }
  absl::StatusOr<std::string> body = out.Take();
  if (!body.ok()) return body.status();
  if (rc != BROTLI_DECODER_RESULT_SUCCESS || avail_in != 0) {
    return absl::InvalidArgumentError(
        "the body is not valid Content-Encoding: br data (corrupt, truncated "
        "or followed by other bytes)");
  }
  return body;
}

}  // namespace

absl::Status CheckContentEncoding(absl::string_view content_encoding) {
  return ParseCodings(content_encoding).status();
}

absl::StatusOr<std::string> DecodeContent(absl::string_view content_encoding,
                                          std::string body, int64_t max_bytes) {
  absl::StatusOr<std::vector<Coding>> codings = ParseCodings(content_encoding);
  if (!codings.ok()) return codings.status();
  // Listed in the order they were applied: undone from the last.
  for (auto it = codings->rbegin(); it != codings->rend(); ++it) {
    absl::StatusOr<std::string> decoded;
    switch (*it) {
      case Coding::kIdentity:
        continue;
      case Coding::kGzip:
        decoded = Inflate(body, 15 + 16, max_bytes, "gzip");
        break;
      case Coding::kDeflate:
        // RFC 9110's deflate is zlib-wrapped; some clients send it raw.
        decoded = Inflate(body, 15, max_bytes, "deflate");
        if (absl::IsInvalidArgument(decoded.status())) {
          decoded = Inflate(body, -15, max_bytes, "deflate");
        }
        break;
      case Coding::kBrotli:
        decoded = Unbrotli(body, max_bytes);
        break;
    }
    if (!decoded.ok()) return decoded.status();
    body = *std::move(decoded);
  }
  if (static_cast<int64_t>(body.size()) > max_bytes) return TooLarge(max_bytes);
  return body;
}

}  // namespace tributary
