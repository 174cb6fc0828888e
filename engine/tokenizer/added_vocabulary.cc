#include "engine/tokenizer/added_vocabulary.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode_class.h"
#include "engine/tokenizer/utf8.h"

namespace tributary {
namespace {

// The code point that ends text[0, end), or 0 when none.
char32_t LastCodePoint(absl::string_view text, size_t end) {
  if (end == 0) return 0;
  size_t begin = end - 1;
  while (begin > 0 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) {
    --begin;
  }
  Utf8Step step = NextUtf8(reinterpret_cast<const uint8_t*>(text.data()) + begin,
                           end - begin);
  return step.kind == Utf8Step::kValid ? step.code_point : 0;
}

struct Decoded {
  char32_t cp;
  size_t len;
};
Decoded CodePointAt(absl::string_view text, size_t pos) {
  Utf8Step step = NextUtf8(reinterpret_cast<const uint8_t*>(text.data()) + pos,
                           text.size() - pos);
  return {step.kind == Utf8Step::kValid ? step.code_point : 0,
          static_cast<size_t>(step.num_bytes)};
}

bool IsAlphanumeric(char32_t cp) {
  return (CodePointClass(cp) & (kClassLetter | kClassNumber)) != 0;
}

}  // namespace

absl::StatusOr<AddedVocabulary> AddedVocabulary::Create(
    std::vector<AddedToken> tokens,
    const std::vector<std::string>& normalized_contents,
    absl::string_view source) {
  AddedVocabulary vocab;
  vocab.tokens_ = std::move(tokens);
  for (size_t i = 0; i < vocab.tokens_.size(); ++i) {
    const AddedToken& token = vocab.tokens_[i];
    if (token.content.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": added_tokens: token id ", token.id, " has empty content"));
    }
    if (!vocab.by_id_.emplace(token.id, i).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": added_tokens: id ", token.id, " appears twice"));
    }
    vocab.by_content_.emplace(token.content, i);
    const bool normalized = token.normalized;
    const std::string& pattern =
        normalized && i < normalized_contents.size() ? normalized_contents[i]
                                                     : token.content;
    if (pattern.empty()) continue;
    vocab.matchers_[normalized ? 1 : 0].patterns.emplace_back(pattern, i);
  }
  for (Matcher& matcher : vocab.matchers_) vocab.BuildMatcher(&matcher);
  return vocab;
}

void AddedVocabulary::BuildMatcher(Matcher* matcher) {
  for (uint32_t k = 0; k < matcher->patterns.size(); ++k) {
    const uint8_t first = static_cast<uint8_t>(matcher->patterns[k].first[0]);
    matcher->by_first_byte[first].push_back(k);
  }
  for (auto& list : matcher->by_first_byte) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return matcher->patterns[a].first.size() >
             matcher->patterns[b].first.size();
    });
  }
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::FindByContent(
    absl::string_view content) const {
  auto it = by_content_.find(content);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::Split(absl::string_view text, bool normalized,
                            std::vector<Segment>* segments) const {
  const Matcher& matcher = matchers_[normalized ? 1 : 0];
  size_t start_offset = 0;  // end of what has been emitted
  size_t pos = 0;           // where the search resumes
  while (pos < text.size()) {
    // Leftmost-longest: the first position with any match, longest there.
    const auto& candidates = matcher.by_first_byte[static_cast<uint8_t>(text[pos])];
    const std::pair<std::string, size_t>* found = nullptr;
    for (uint32_t k : candidates) {
      const std::string& p = matcher.patterns[k].first;
      if (p.size() <= text.size() - pos &&
          std::memcmp(text.data() + pos, p.data(), p.size()) == 0) {
        found = &matcher.patterns[k];
        break;
      }
    }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[found->second];
    size_t start = pos;
    size_t stop = pos + found->first.size();
    pos = stop;  // the scan resumes after the match, used or not
    if (token.single_word) {
      const bool start_ok = start == 0 || !IsAlphanumeric(LastCodePoint(text, start));
      const bool stop_ok = stop == text.size() ||
                           !IsAlphanumeric(CodePointAt(text, stop).cp);
      if (!start_ok || !stop_ok) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t prev = new_start - 1;
        while (prev > 0 && (static_cast<uint8_t>(text[prev]) & 0xC0) == 0x80) {
          --prev;
        }
        if (!IsWhiteSpace(CodePointAt(text, prev).cp)) break;
        new_start = prev;
      }
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        Decoded d = CodePointAt(text, stop);
        if (!IsWhiteSpace(d.cp)) break;
        stop += d.len;
      }
    }
    if (start_offset < start) segments->push_back({start_offset, start, -1});
    segments->push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) {
    segments->push_back({start_offset, text.size(), -1});
  }
}

}  // namespace tributary
