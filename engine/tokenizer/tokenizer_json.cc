#include "engine/tokenizer/tokenizer_json.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

using Json = nlohmann::json;

absl::Status Unsupported(absl::string_view source, absl::string_view field,
                         absl::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat(source, ": unsupported ", field, ": ", what));
}
absl::Status Malformed(absl::string_view source, absl::string_view field,
                       absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": malformed ", field, ": ", what));
}

std::string Short(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 120) text = text.substr(0, 117) + "...";
  return text;
}

const Json* Field(const Json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

bool IsNull(const Json* value) { return value == nullptr || value->is_null(); }

// A boolean field; absent or null -> fallback.
absl::StatusOr<bool> Bool(const Json& object, const char* name, bool fallback,
                          absl::string_view source, absl::string_view where) {
  const Json* value = Field(object, name);
  if (IsNull(value)) return fallback;
  if (!value->is_boolean()) {
    return Malformed(source, absl::StrCat(where, ".", name), "not a boolean");
  }
  return value->get<bool>();
}

std::string TypeOf(const Json& object) {
  const Json* type = Field(object, "type");
  return type != nullptr && type->is_string() ? type->get<std::string>() : "";
}

absl::Status ParseNormalizer(const Json& n, absl::string_view source,
                             TokenizerSpec* spec) {
  if (n.is_null()) return absl::OkStatus();
  const std::string type = TypeOf(n);
  if (type == "NFC") {
    spec->nfc = true;
    return absl::OkStatus();
  }
  if (type == "Sequence") {
    const Json* list = Field(n, "normalizers");
    if (list == nullptr || !list->is_array()) {
      return Malformed(source, "normalizer.normalizers", "not an array");
    }
    for (const Json& item : *list) {
      if (TypeOf(item) != "NFC") {
        return Unsupported(source, "normalizer", Short(item));
      }
      spec->nfc = true;
    }
    return absl::OkStatus();
  }
  return Unsupported(source, "normalizer",
                     absl::StrCat("type '", type, "' (only NFC is supported)"));
}

absl::Status CheckByteLevel(const Json& step, bool want_regex,
                            absl::string_view source, absl::string_view where) {
  auto prefix = Bool(step, "add_prefix_space", false, source, where);
  if (!prefix.ok()) return prefix.status();
  if (*prefix) return Unsupported(source, where, "add_prefix_space=true");
  auto use_regex = Bool(step, "use_regex", true, source, where);
  if (!use_regex.ok()) return use_regex.status();
  if (*use_regex != want_regex) {
    return Unsupported(source, where,
                       absl::StrCat("use_regex=", *use_regex ? "true" : "false",
                                    want_regex ? " (expected true here)"
                                               : " after a Split step"));
  }
  return absl::OkStatus();
}

absl::Status ParsePreTokenizer(const Json& p, absl::string_view source,
                               TokenizerSpec* spec) {
  const std::string type = TypeOf(p);
  if (type == "ByteLevel") {
    absl::Status status = CheckByteLevel(p, true, source, "pre_tokenizer");
    if (!status.ok()) return status;
    spec->split_pattern = kGpt2Pattern;
    return absl::OkStatus();
  }
  if (type != "Sequence") {
    return Unsupported(source, "pre_tokenizer",
                       absl::StrCat("type '", type,
                                    "' (expected Sequence[Split, ByteLevel])"));
  }
  const Json* list = Field(p, "pretokenizers");
  if (list == nullptr || !list->is_array()) {
    return Malformed(source, "pre_tokenizer.pretokenizers", "not an array");
  }
  if (list->size() == 1 && TypeOf((*list)[0]) == "ByteLevel") {
    return ParsePreTokenizer((*list)[0], source, spec);
  }
  if (list->size() != 2 || TypeOf((*list)[0]) != "Split" ||
      TypeOf((*list)[1]) != "ByteLevel") {
    return Unsupported(source, "pre_tokenizer.pretokenizers",
                       absl::StrCat(Short(*list),
                                    " (expected [Split, ByteLevel])"));
  }
  const Json& split = (*list)[0];
  const Json* pattern = Field(split, "pattern");
  const Json* regex = pattern != nullptr ? Field(*pattern, "Regex") : nullptr;
  if (regex == nullptr || !regex->is_string()) {
    return Unsupported(source, "pre_tokenizer.pretokenizers[0].pattern",
                       pattern == nullptr ? "missing" : Short(*pattern));
  }
  const Json* behavior = Field(split, "behavior");
  if (behavior == nullptr || !behavior->is_string() ||
      behavior->get<std::string>() != "Isolated") {
    return Unsupported(source, "pre_tokenizer.pretokenizers[0].behavior",
                       behavior == nullptr ? "missing" : Short(*behavior));
  }
  auto invert = Bool(split, "invert", false, source,
                     "pre_tokenizer.pretokenizers[0]");
  if (!invert.ok()) return invert.status();
  if (*invert) {
    return Unsupported(source, "pre_tokenizer.pretokenizers[0].invert", "true");
  }
  spec->split_pattern = regex->get<std::string>();
  return CheckByteLevel((*list)[1], false, source,
                        "pre_tokenizer.pretokenizers[1]");
}

absl::Status ParseModel(const Json& m, absl::string_view source,
                        TokenizerSpec* spec) {
  if (!m.is_object()) return Malformed(source, "model", "missing or not an object");
  const std::string type = TypeOf(m);
  if (!type.empty() && type != "BPE") {
    return Unsupported(source, "model.type", absl::StrCat("'", type, "'"));
  }
  const Json* dropout = Field(m, "dropout");
  if (!IsNull(dropout) && !(dropout->is_number() && dropout->get<double>() == 0)) {
    return Unsupported(source, "model.dropout", Short(*dropout));
  }
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* value = Field(m, name);
    if (!IsNull(value) && !(value->is_string() && value->get<std::string>().empty())) {
      return Unsupported(source, absl::StrCat("model.", name), Short(*value));
    }
  }
  auto byte_fallback = Bool(m, "byte_fallback", false, source, "model");
  if (!byte_fallback.ok()) return byte_fallback.status();
  if (*byte_fallback) return Unsupported(source, "model.byte_fallback", "true");
  auto ignore_merges = Bool(m, "ignore_merges", false, source, "model");
  if (!ignore_merges.ok()) return ignore_merges.status();
  spec->bpe_options.ignore_merges = *ignore_merges;
  auto fuse_unk = Bool(m, "fuse_unk", false, source, "model");
  if (!fuse_unk.ok()) return fuse_unk.status();
  spec->bpe_options.fuse_unk = *fuse_unk;
  const Json* unk = Field(m, "unk_token");
  if (!IsNull(unk)) {
    if (!unk->is_string()) return Malformed(source, "model.unk_token", "not a string");
    spec->bpe_options.unk_token = unk->get<std::string>();
  }

  const Json* vocab = Field(m, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return Malformed(source, "model.vocab", "missing or not an object");
  }
  spec->vocab.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return Malformed(source, "model.vocab",
                       absl::StrCat("token '", it.key(), "' has no integer id"));
    }
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > INT32_MAX - 1) {
      return Malformed(source, "model.vocab",
                       absl::StrCat("token '", it.key(), "' has id ", id));
    }
    spec->vocab.emplace_back(it.key(), static_cast<int32_t>(id));
  }
  const Json* merges = Field(m, "merges");
  if (merges == nullptr || !merges->is_array()) {
    return Malformed(source, "model.merges", "missing or not an array");
  }
  spec->merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const Json& merge = (*merges)[i];
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return Malformed(source, absl::StrCat("model.merges[", i, "]"),
                         absl::StrCat("'", text, "' is not two tokens separated by one space"));
      }
      spec->merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      spec->merges.emplace_back(merge[0].get<std::string>(),
                                merge[1].get<std::string>());
    } else {
      return Malformed(source, absl::StrCat("model.merges[", i, "]"), Short(merge));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const Json* list, absl::string_view source,
                              TokenizerSpec* spec) {
  if (IsNull(list)) return absl::OkStatus();
  if (!list->is_array()) return Malformed(source, "added_tokens", "not an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& item = (*list)[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    const Json* id = Field(item, "id");
    const Json* content = Field(item, "content");
    if (id == nullptr || !id->is_number_integer() || id->get<int64_t>() < 0 ||
        id->get<int64_t>() > INT32_MAX - 1 || content == nullptr ||
        !content->is_string()) {
      return Malformed(source, where, "needs an integer id and a string content");
    }
    AddedToken token;
    token.id = static_cast<int32_t>(id->get<int64_t>());
    token.content = content->get<std::string>();
    struct FlagField {
      const char* name;
      bool* flag;
      bool fallback;
    };
    // HF's defaults: special tokens are not normalized, others are.
    const Json* special = Field(item, "special");
    const bool is_special = special != nullptr && special->is_boolean() &&
                            special->get<bool>();
    for (FlagField f : {FlagField{"special", &token.special, false},
                        FlagField{"single_word", &token.single_word, false},
                        FlagField{"lstrip", &token.lstrip, false},
                        FlagField{"rstrip", &token.rstrip, false},
                        FlagField{"normalized", &token.normalized, !is_special}}) {
      auto value = Bool(item, f.name, f.fallback, source, where);
      if (!value.ok()) return value.status();
      *f.flag = *value;
    }
    spec->added_tokens.push_back(std::move(token));
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view source) {
  Json json = Json::parse(text.begin(), text.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid JSON"));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the top level is not a JSON object"));
  }
  return json;
}

absl::StatusOr<TokenizerSpec> ParseTokenizerJsonImpl(absl::string_view text,
                                                     absl::string_view source) {
  auto json = ParseJson(text, source);
  if (!json.ok()) return json.status();
  TokenizerSpec spec;
  spec.source = std::string(source);
  for (const char* name : {"truncation", "padding"}) {
    if (!IsNull(Field(*json, name))) {
      return Unsupported(source, name, Short((*json)[name]));
    }
  }
  absl::Status status = ParseNormalizer(
      IsNull(Field(*json, "normalizer")) ? Json() : (*json)["normalizer"],
      source, &spec);
  if (!status.ok()) return status;
  const Json* pre = Field(*json, "pre_tokenizer");
  if (IsNull(pre)) {
    return Unsupported(source, "pre_tokenizer",
                       "missing (a byte-level tokenizer needs ByteLevel)");
  }
  status = ParsePreTokenizer(*pre, source, &spec);
  if (!status.ok()) return status;
  const Json* post = Field(*json, "post_processor");
  if (!IsNull(post) && TypeOf(*post) != "ByteLevel") {
    return Unsupported(source, "post_processor",
                       absl::StrCat("type '", TypeOf(*post), "'"));
  }
  const Json* decoder = Field(*json, "decoder");
  if (IsNull(decoder) || TypeOf(*decoder) != "ByteLevel") {
    return Unsupported(source, "decoder",
                       IsNull(decoder) ? "missing (expected ByteLevel)"
                                       : absl::StrCat("type '", TypeOf(*decoder), "'"));
  }
  const Json* model = Field(*json, "model");
  if (model == nullptr) return Malformed(source, "model", "missing");
  status = ParseModel(*model, source, &spec);
  if (!status.ok()) return status;
  status = ParseAddedTokens(Field(*json, "added_tokens"), source, &spec);
  if (!status.ok()) return status;
  return spec;
}

// eos_token etc.: a string, an AddedToken object {"content": ...} or null.
absl::StatusOr<std::optional<std::string>> TokenField(const Json& config,
                                                      const char* name,
                                                      absl::string_view source) {
  const Json* value = Field(config, name);
  if (IsNull(value)) return std::optional<std::string>();
  if (value->is_string()) return std::optional<std::string>(value->get<std::string>());
  const Json* content = Field(*value, "content");
  if (content != nullptr && content->is_string()) {
    return std::optional<std::string>(content->get<std::string>());
  }
  return Malformed(source, name, Short(*value));
}

}  // namespace

absl::StatusOr<TokenizerSpec> ParseTokenizerJson(absl::string_view json_text,
                                                 absl::string_view source) {
  try {
    return ParseTokenizerJsonImpl(json_text, source);
  } catch (const std::exception& e) {  // a library bug; never expected
    return absl::InternalError(absl::StrCat(source, ": ", e.what()));
  }
}

absl::Status ParseTokenizerConfig(absl::string_view json_text,
                                  absl::string_view source,
                                  TokenizerSpec* spec) {
  try {
    auto json = ParseJson(json_text, source);
    if (!json.ok()) return json.status();
    auto eos = TokenField(*json, "eos_token", source);
    if (!eos.ok()) return eos.status();
    auto pad = TokenField(*json, "pad_token", source);
    if (!pad.ok()) return pad.status();
    auto bos = TokenField(*json, "bos_token", source);
    if (!bos.ok()) return bos.status();
    spec->eos_token = *eos;
    spec->pad_token = *pad;
    spec->bos_token = *bos;
    auto add_bos = Bool(*json, "add_bos_token", false, source, "config");
    if (!add_bos.ok()) return add_bos.status();
    if (*add_bos) return Unsupported(source, "add_bos_token", "true");
    const Json* chat = Field(*json, "chat_template");
    if (!IsNull(chat)) {
      if (chat->is_string()) {
        spec->chat_template = chat->get<std::string>();
      } else if (chat->is_array()) {  // [{"name": ..., "template": ...}]
        for (const Json& item : *chat) {
          const Json* name = Field(item, "name");
          const Json* body = Field(item, "template");
          if (name != nullptr && name->is_string() &&
              name->get<std::string>() == "default" && body != nullptr &&
              body->is_string()) {
            spec->chat_template = body->get<std::string>();
          }
        }
      } else {
        return Malformed(source, "chat_template", "not a string or a list");
      }
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(source, ": ", e.what()));
  }
}

}  // namespace tributary
