// Typed, checked reads of the members of one JSON object from a config file.
#ifndef TRIBUTARY_ENGINE_MODEL_JSON_FIELD_READER_H_
#define TRIBUTARY_ENGINE_MODEL_JSON_FIELD_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace tributary {

// A member that is absent or JSON null counts as absent (transformers writes
// null for unset optional fields). A present member of the wrong type is an
// error; integers must be JSON integers (4.0 is not an int), doubles accept
// both. Errors are INVALID_ARGUMENT and read
//   "<source>: <prefix><key> = <value as JSON> <reason>"
// e.g. "config.json: text_config.hidden_size = "big" is a string, expected
// an integer". The reader keeps a reference to `object`: it must outlive it.
class JsonFieldReader {
 public:
  JsonFieldReader(const nlohmann::json& object, std::string source,
                  std::string prefix);

  bool Has(absl::string_view key) const;

  absl::StatusOr<std::optional<int64_t>> OptionalInt(
      absl::string_view key) const;
  absl::StatusOr<int64_t> Int(absl::string_view key,
                              int64_t default_value) const;
  absl::StatusOr<std::optional<double>> OptionalDouble(
      absl::string_view key) const;
  absl::StatusOr<bool> Bool(absl::string_view key, bool default_value) const;
  absl::StatusOr<std::optional<bool>> OptionalBool(
      absl::string_view key) const;
  absl::StatusOr<std::optional<std::string>> OptionalString(
      absl::string_view key) const;
  absl::StatusOr<std::optional<std::vector<int64_t>>> OptionalIntList(
      absl::string_view key) const;
  // An integer or a list of integers (e.g. eos_token_id).
  absl::StatusOr<std::optional<std::vector<int64_t>>> OptionalIntOrIntList(
      absl::string_view key) const;
  absl::StatusOr<std::optional<std::vector<std::string>>> OptionalStringList(
      absl::string_view key) const;
  // A nested object, or nullptr when absent/null.
  absl::StatusOr<const nlohmann::json*> OptionalObject(
      absl::string_view key) const;

  // "<prefix><key>", e.g. "text_config.hidden_size".
  std::string FieldName(absl::string_view key) const;
  // INVALID_ARGUMENT "<source>: <prefix><key> = <value> <reason>"; the value
  // is omitted when the member is absent.
  absl::Status Error(absl::string_view key, absl::string_view reason) const;

  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const nlohmann::json* Get(absl::string_view key) const;

  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

// A JSON value as short text for error messages (at most ~60 characters).
std::string JsonExcerpt(const nlohmann::json& value);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_JSON_FIELD_READER_H_
