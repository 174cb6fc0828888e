#include "engine/model/json_field_reader.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/model/strict_json.h"

namespace tributary {
namespace {

using Json = nlohmann::json;

bool AsInt64(const Json& value, int64_t* out) {
  if (value.is_number_integer() && !value.is_number_unsigned()) {
    *out = value.get<int64_t>();
    return true;
  }
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(v);
    return true;
  }
  return false;
}

}  // namespace

std::string JsonExcerpt(const Json& value) {
  std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true,
                                Json::error_handler_t::replace);
  constexpr size_t kMaxChars = 60;
  if (text.size() > kMaxChars) {
    text = absl::StrCat(text.substr(0, kMaxChars), "...");
  }
  return text;
}

JsonFieldReader::JsonFieldReader(const Json& object, std::string source,
                                 std::string prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

const Json* JsonFieldReader::Get(absl::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFieldReader::Has(absl::string_view key) const {
  return Get(key) != nullptr;
}

std::string JsonFieldReader::FieldName(absl::string_view key) const {
  return absl::StrCat(prefix_, key);
}

absl::Status JsonFieldReader::Error(absl::string_view key,
                                    absl::string_view reason) const {
  const Json* value = Get(key);
  if (value == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", FieldName(key), " ", reason));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      source_, ": ", FieldName(key), " = ", JsonExcerpt(*value), " ", reason));
}

absl::StatusOr<std::optional<int64_t>> JsonFieldReader::OptionalInt(
    absl::string_view key) const {
  const Json* value = Get(key);
  if (value == nullptr) return std::optional<int64_t>();
  int64_t result = 0;
  if (!AsInt64(*value, &result)) {
    return Error(key, absl::StrCat("is ", JsonTypeName(*value),
                                   ", expected a 64-bit integer"));
  }
  return std::optional<int64_t>(result);
}

absl::StatusOr<int64_t> JsonFieldReader::Int(absl::string_view key,
                                             int64_t default_value) const {
  absl::StatusOr<std::optional<int64_t>> value = OptionalInt(key);
  if (!value.ok()) return value.status();
  return value->value_or(default_value);
}

absl::StatusOr<std::optional<double>> JsonFieldReader::OptionalDouble(
    absl::string_view key) const {
  const Json* value = Get(key);
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number()) {
    return Error(key,
                 absl::StrCat("is ", JsonTypeName(*value), ", expected a number"));
  }
  return std::optional<double>(value->get<double>());
}

absl::StatusOr<std::optional<bool>> JsonFieldReader::OptionalBool(
    absl::string_view key) const {
  const Json* value = Get(key);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) {
    return Error(key, absl::StrCat("is ", JsonTypeName(*value),
                                   ", expected true or false"));
  }
  return std::optional<bool>(value->get<bool>());
}

absl::StatusOr<bool> JsonFieldReader::Bool(absl::string_view key,
                                           bool default_value) const {
  absl::StatusOr<std::optional<bool>> value = OptionalBool(key);
  if (!value.ok()) return value.status();
  return value->value_or(default_value);
}

absl::StatusOr<std::optional<std::string>> JsonFieldReader::OptionalString(
    absl::string_view key) const {
  const Json* value = Get(key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) {
    return Error(key,
                 absl::StrCat("is ", JsonTypeName(*value), ", expected a string"));
  }
  return std::optional<std::string>(value->get<std::string>());
}

absl::StatusOr<std::optional<std::vector<int64_t>>>
JsonFieldReader::OptionalIntList(absl::string_view key) const {
  const Json* value = Get(key);
  if (value == nullptr) return std::optional<std::vector<int64_t>>();
  if (!value->is_array()) {
    return Error(key, absl::StrCat("is ", JsonTypeName(*value),
                                   ", expected a list of integers"));
  }
  std::vector<int64_t> result;
  for (size_t i = 0; i < value->size(); ++i) {
    int64_t item = 0;
    if (!AsInt64((*value)[i], &item)) {
      return Error(key, absl::StrCat("has element ", i, " = ",
                                     JsonExcerpt((*value)[i]),
                                     ", expected an integer"));
    }
    result.push_back(item);
  }
  return std::optional<std::vector<int64_t>>(std::move(result));
}

absl::StatusOr<std::optional<std::vector<int64_t>>>
JsonFieldReader::OptionalIntOrIntList(absl::string_view key) const {
  const Json* value = Get(key);
  if (value != nullptr && value->is_number()) {
    int64_t item = 0;
    if (!AsInt64(*value, &item)) {
      return Error(key, "is not an integer or a list of integers");
    }
    return std::optional<std::vector<int64_t>>(std::vector<int64_t>{item});
  }
  if (value != nullptr && !value->is_array()) {
    return Error(key, absl::StrCat("is ", JsonTypeName(*value),
                                   ", expected an integer or a list of "
                                   "integers"));
  }
  return OptionalIntList(key);
}

absl::StatusOr<std::optional<std::vector<std::string>>>
JsonFieldReader::OptionalStringList(absl::string_view key) const {
  const Json* value = Get(key);
  if (value == nullptr) return std::optional<std::vector<std::string>>();
  if (!value->is_array()) {
    return Error(key, absl::StrCat("is ", JsonTypeName(*value),
                                   ", expected a list of strings"));
  }
  std::vector<std::string> result;
  for (size_t i = 0; i < value->size(); ++i) {
    if (!(*value)[i].is_string()) {
      return Error(key, absl::StrCat("has element ", i, " = ",
                                     JsonExcerpt((*value)[i]),
                                     ", expected a string"));
    }
    result.push_back((*value)[i].get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(result));
}

absl::StatusOr<const Json*> JsonFieldReader::OptionalObject(
    absl::string_view key) const {
  const Json* value = Get(key);
  if (value == nullptr) return static_cast<const Json*>(nullptr);
  if (!value->is_object()) {
    return Error(key, absl::StrCat("is ", JsonTypeName(*value),
                                   ", expected an object"));
  }
  return value;
}

}  // namespace tributary
