// A JSON parser for files the loader must not trust: config.json,
// generation_config.json, safetensors headers and index files.
//
// Why not plain nlohmann::json::parse: it silently keeps the last of
// duplicate object keys, which would let two different readers of the same
// safetensors header disagree on a tensor's offsets, and its error reporting
// goes through exceptions. This parser drives nlohmann's SAX interface with a
// handler that builds the document itself, so it
//   - rejects duplicate keys in any object, naming the key and its path,
//   - caps the nesting depth (the SAX parser itself is iterative),
//   - reports syntax errors (including ill-formed UTF-8 inside strings, which
//     nlohmann's lexer rejects) with the byte offset, as an absl::Status,
//   - never lets an exception escape.
#ifndef TRIBUTARY_ENGINE_MODEL_STRICT_JSON_H_
#define TRIBUTARY_ENGINE_MODEL_STRICT_JSON_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace tributary {

inline constexpr int kDefaultMaxJsonDepth = 64;

// Parses `text` as one JSON value (surrounding whitespace allowed).
// `source` (a file name) prefixes every error message. Errors are
// INVALID_ARGUMENT.
absl::StatusOr<nlohmann::json> ParseStrictJson(
    absl::string_view text, absl::string_view source,
    int max_depth = kDefaultMaxJsonDepth);

// ParseStrictJson, and the value must be an object (the top level of
// config.json, generation_config.json, an index, ...).
absl::StatusOr<nlohmann::json> ParseStrictJsonObject(absl::string_view text,
                                                     absl::string_view source);

// A short human-readable name of a JSON value's type ("a string",
// "an integer", ...), for error messages.
absl::string_view JsonTypeName(const nlohmann::json& value);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_STRICT_JSON_H_
