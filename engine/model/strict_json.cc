#include "engine/model/strict_json.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tributary {
namespace {

using Json = nlohmann::json;

// Builds the document from SAX events. Containers under construction are
// kept on an explicit stack; a pointer to a child stays valid because
// nothing is appended to its parent until the child is closed.
class StrictDomBuilder {
 public:
  explicit StrictDomBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return AddValue(Json(nullptr)); }
  bool boolean(bool value) { return AddValue(Json(value)); }
  bool number_integer(Json::number_integer_t value) {
    return AddValue(Json(value));
  }
  bool number_unsigned(Json::number_unsigned_t value) {
    return AddValue(Json(value));
  }
  bool number_float(Json::number_float_t value, const Json::string_t&) {
    return AddValue(Json(value));
  }
  bool string(Json::string_t& value) { return AddValue(Json(std::move(value))); }
  bool binary(Json::binary_t&) {
    error_ = "binary values are not JSON";
    return false;
  }
  bool start_object(std::size_t) { return Open(Json::object()); }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_array() { return Close(); }

  bool key(Json::string_t& key) {
    Frame& frame = stack_.back();
    if (frame.value->contains(key)) {
      error_ = absl::StrCat("duplicate key \"", key, "\" in the object at ",
                            Path());
      return false;
    }
    frame.pending_key = std::move(key);
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& ex) {
    error_ = ex.what();
    return false;
  }

  const std::string& error() const { return error_; }
  Json TakeRoot() { return std::move(root_); }

 private:
  struct Frame {
    Json* value;
    std::string pending_key;  // The key of the next member (objects only).
  };

  // Where the next value goes: the root, the end of an array, or the
  // pending key of an object.
  Json* Slot(Json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = stack_.back();
    if (frame.value->is_array()) {
      frame.value->push_back(std::move(value));
      return &frame.value->back();
    }
    Json& member = (*frame.value)[frame.pending_key];
    member = std::move(value);
    return &member;
  }

  bool AddValue(Json value) {
    Slot(std::move(value));
    return true;
  }

  bool Open(Json container) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      error_ = absl::StrCat("nesting deeper than ", max_depth_, " levels at ",
                            Path());
      return false;
    }
    Json* slot = Slot(std::move(container));
    stack_.push_back(Frame{slot, ""});
    return true;
  }

  bool Close() {
    stack_.pop_back();
    return true;
  }

  // A JSON-pointer-like path of the innermost open container, e.g. "/a/3".
  std::string Path() const {
    std::string path;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      const Frame& frame = stack_[i];
      if (frame.value->is_array()) {
        absl::StrAppend(&path, "/", frame.value->size() - 1);
      } else {
        absl::StrAppend(&path, "/", frame.pending_key);
      }
    }
    return path.empty() ? "/" : path;
  }

  int max_depth_;
  Json root_;
  std::vector<Frame> stack_;
  std::string error_;
};

}  // namespace

absl::StatusOr<nlohmann::json> ParseStrictJson(absl::string_view text,
                                               absl::string_view source,
                                               int max_depth) {
  // nlohmann's lexer treats a NUL byte as the end of input, so "{}\0junk"
  // would parse as "{}". JSON never contains a raw NUL (inside strings it
  // must be escaped), so refuse it up front.
  const size_t nul = text.find('\0');
  if (nul != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": invalid JSON: NUL byte at offset ", nul));
  }
  StrictDomBuilder builder(max_depth);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder,
                         Json::input_format_t::json, /*strict=*/true,
                         /*ignore_comments=*/false);
  } catch (const std::exception& e) {
    // nlohmann reports through the handler; only allocation failures and
    // the like can land here.
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": JSON parse failed: ", e.what()));
  }
  if (!ok) {
    std::string reason =
        builder.error().empty() ? std::string("invalid JSON") : builder.error();
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid JSON: ", reason));
  }
  return builder.TakeRoot();
}

absl::string_view JsonTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a floating-point number";
    case Json::value_t::binary:
      return "binary";
    case Json::value_t::discarded:
      return "discarded";
  }
  return "unknown";
}

absl::StatusOr<nlohmann::json> ParseStrictJsonObject(absl::string_view text,
                                                     absl::string_view source) {
  absl::StatusOr<nlohmann::json> root = ParseStrictJson(text, source);
  if (root.ok() && !root->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": top level is ", JsonTypeName(*root), ", expected an object"));
  }
  return root;
}

}  // namespace tributary
