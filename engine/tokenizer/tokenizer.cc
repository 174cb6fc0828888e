#include "engine/tokenizer/tokenizer.h"

#include <sys/stat.h>

#include <atomic>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/mapped_file.h"
#include "base/status_macros.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/utf8.h"

namespace tributary {
namespace {

// Words longer than this are not cached (long runs are rare and unlikely
// to repeat); the cache is emptied when it reaches kMaxCachedWords.
constexpr size_t kMaxCachedWordBytes = 64;
constexpr size_t kMaxCachedWords = 1 << 16;

// The per-thread word cache. It serves one tokenizer at a time (the one
// whose serial it holds) and is emptied when another one uses the thread,
// so it can never hand out ids of a different vocabulary.
struct WordCache {
  uint64_t owner = 0;
  absl::flat_hash_map<std::string, absl::InlinedVector<int32_t, 6>> words;
};

WordCache& ThreadWordCache(uint64_t owner) {
  thread_local WordCache cache;
  if (cache.owner != owner) {
    cache.words.clear();
    cache.owner = owner;
  }
  return cache;
}

uint64_t NextSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

bool IsDirectory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}
bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}
std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(
    const std::string& path) {
  std::string json_path = path;
  if (IsDirectory(path)) {
    json_path = absl::StrCat(path, "/tokenizer.json");
    if (!Exists(json_path)) {
      return absl::NotFoundError(
          absl::StrCat(path, ": directory has no tokenizer.json"));
    }
  }
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(json_path));
  ASSIGN_OR_RETURN(TokenizerSpec spec, ParseTokenizerJson(file.view(), json_path));
  const std::string dir = DirName(json_path);
  const std::string config_path = dir + "/tokenizer_config.json";
  if (Exists(config_path)) {
    ASSIGN_OR_RETURN(std::string config, ReadFileToString(config_path));
    RETURN_IF_ERROR(ParseTokenizerConfig(config, config_path, &spec));
  }
  const std::string jinja_path = dir + "/chat_template.jinja";
  if (spec.chat_template.empty() && Exists(jinja_path)) {
    ASSIGN_OR_RETURN(spec.chat_template, ReadFileToString(jinja_path));
  }
  return Create(std::move(spec));
}

Tokenizer::Tokenizer(BpeModel model, AddedVocabulary added,
                     std::unique_ptr<PreTokenizer> pre_tokenizer,
                     ChatTemplate chat)
    : model_(std::move(model)),
      added_(std::move(added)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      chat_template_(std::move(chat)),
      serial_(NextSerial()) {}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  const std::string& source = spec.source;
  ASSIGN_OR_RETURN(BpeModel model,
                   BpeModel::Create(std::move(spec.vocab), spec.merges,
                                    spec.bpe_options, source));
  // HF keeps a normalized=true token in its normalized form: it is matched,
  // looked up and decoded as such.
  std::vector<std::string> normalized_contents;
  for (AddedToken& token : spec.added_tokens) {
    if (spec.nfc && token.normalized) {
      ASSIGN_OR_RETURN(token.content, NormalizeNfc(token.content));
    }
    normalized_contents.push_back(token.content);
  }
  ASSIGN_OR_RETURN(AddedVocabulary added,
                   AddedVocabulary::Create(spec.added_tokens,
                                           normalized_contents, source));
  auto pre = PreTokenizer::ForPattern(spec.split_pattern);
  if (!pre.ok()) {
    return absl::Status(pre.status().code(),
                        absl::StrCat(source, ": ", pre.status().message()));
  }
  auto has = [&](absl::string_view token) {
    return added.FindByContent(token) != nullptr ||
           model.TokenToId(token).has_value();
  };
  ChatTemplate chat(has("<think>") && has("</think>"), spec.chat_template);
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer(
      std::move(model), std::move(added), std::move(pre).value(), chat));
  Tokenizer& t = *tokenizer;
  t.nfc_ = spec.nfc;
  t.source_ = source;

  t.id_end_ = t.model_.id_end();
  for (const AddedToken& token : t.added_.tokens()) {
    t.id_end_ = std::max(t.id_end_, token.id + 1);
  }
  t.decoded_.resize(t.id_end_);
  t.exists_.assign(t.id_end_, false);
  t.special_.assign(t.id_end_, false);
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  // HF's ByteLevel decoder maps each token's characters back to bytes, and
  // keeps the token's own UTF-8 when one of them is not in the alphabet.
  auto decode = [&](const std::string& token) {
    auto bytes = alphabet.Decode(token);
    return bytes ? *std::move(bytes) : token;
  };
  for (int32_t id = 0; id < t.model_.id_end(); ++id) {
    const std::string* token = t.model_.IdToToken(id);
    if (token == nullptr) continue;
    t.exists_[id] = true;
    t.decoded_[id] = decode(*token);
  }
  for (const AddedToken& token : t.added_.tokens()) {
    t.exists_[token.id] = true;
    t.special_[token.id] = token.special;
    t.decoded_[token.id] = decode(token.content);
  }
  auto resolve = [&](const std::optional<std::string>& token,
                     const char* field) -> absl::StatusOr<std::optional<int32_t>> {
    if (!token) return std::optional<int32_t>();
    auto id = t.TokenToId(*token);
    if (!id) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": tokenizer_config.json ", field, " '", *token,
          "' is not a token of the vocabulary"));
    }
    return id;
  };
  ASSIGN_OR_RETURN(t.eos_token_id_, resolve(spec.eos_token, "eos_token"));
  ASSIGN_OR_RETURN(t.pad_token_id_, resolve(spec.pad_token, "pad_token"));
  return tokenizer;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(
    absl::string_view text) const {
  RETURN_IF_ERROR(ValidateUtf8(text));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (!added_.HasTokens(/*normalized=*/false)) {
    RETURN_IF_ERROR(EncodeSegment(text, &ids));
    return ids;
  }
  std::vector<AddedVocabulary::Segment> segments;
  added_.Split(text, /*normalized=*/false, &segments);
  for (const auto& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      RETURN_IF_ERROR(EncodeSegment(
          text.substr(segment.begin, segment.end - segment.begin), &ids));
    }
  }
  return ids;
}

absl::Status Tokenizer::EncodeSegment(absl::string_view text,
                                      std::vector<int32_t>* ids) const {
  std::string normalized;
  if (nfc_) {
    ASSIGN_OR_RETURN(normalized, NormalizeNfc(text));
    text = normalized;
  }
  if (!added_.HasTokens(/*normalized=*/true)) return EncodePlain(text, ids);
  std::vector<AddedVocabulary::Segment> segments;
  added_.Split(text, /*normalized=*/true, &segments);
  for (const auto& segment : segments) {
    if (segment.id >= 0) {
      ids->push_back(segment.id);
    } else {
      RETURN_IF_ERROR(EncodePlain(
          text.substr(segment.begin, segment.end - segment.begin), ids));
    }
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodePlain(absl::string_view text,
                                    std::vector<int32_t>* ids) const {
  std::vector<absl::string_view> pieces;
  pieces.reserve(text.size() / 4 + 1);
  RETURN_IF_ERROR(pre_tokenizer_->Split(text, &pieces));
  WordCache& cache = ThreadWordCache(serial_);
  for (absl::string_view piece : pieces) {
    if (piece.size() > kMaxCachedWordBytes) {
      model_.EncodeWord(piece, ids);
      continue;
    }
    auto it = cache.words.find(piece);
    if (it != cache.words.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      continue;
    }
    const size_t begin = ids->size();
    model_.EncodeWord(piece, ids);
    if (cache.words.size() >= kMaxCachedWords) cache.words.clear();
    cache.words.emplace(std::string(piece),
                        absl::InlinedVector<int32_t, 6>(ids->begin() + begin,
                                                        ids->end()));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::string_view> Tokenizer::TokenBytes(
    int32_t id, bool skip_special_tokens) const {
  if (id < 0 || id >= id_end_ || !exists_[id]) {
    return absl::NotFoundError(absl::StrCat(
        "unknown token id ", id, " (the vocabulary has ids below ", id_end_,
        ")"));
  }
  if (skip_special_tokens && special_[id]) return absl::string_view();
  return absl::string_view(decoded_[id]);
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    ASSIGN_OR_RETURN(absl::string_view piece, TokenBytes(id, skip_special_tokens));
    bytes.append(piece.data(), piece.size());
  }
  std::string text;
  text.reserve(bytes.size());
  AppendUtf8Lossy(bytes, /*final=*/true, &text);
  return text;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeChat(
    const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  ASSIGN_OR_RETURN(std::string text, chat_template_.Render(messages, options));
  return Encode(text);
}

std::optional<int32_t> Tokenizer::TokenToId(absl::string_view token) const {
  if (const AddedToken* added = added_.FindByContent(token)) return added->id;
  return model_.TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* added = added_.FindById(id)) return added->content;
  const std::string* token = model_.IdToToken(id);
  if (token == nullptr) return std::nullopt;
  return *token;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < id_end_ && special_[id];
}

bool Tokenizer::IsAddedToken(int32_t id) const {
  return added_.FindById(id) != nullptr;
}

}  // namespace tributary
