#include "engine/tokenizer/bpe_model.h"

#include <queue>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/byte_level.h"

namespace tributary {
namespace {

// Words up to this many symbols use the quadratic loop: it touches a small
// contiguous array and beats the heap below roughly this size.
constexpr size_t kQuadraticMaxSymbols = 48;

}  // namespace

absl::StatusOr<BpeModel> BpeModel::Create(
    std::vector<std::pair<std::string, int32_t>> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges,
    const Options& options, absl::string_view source) {
  BpeModel model;
  model.options_ = options;
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": model.vocab: token '", token, "' has negative id ", id));
    }
    max_id = std::max(max_id, id);
  }
  model.id_to_token_.resize(static_cast<size_t>(max_id + 1));
  model.has_id_.assign(static_cast<size_t>(max_id + 1), false);
  model.token_to_id_.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    if (model.has_id_[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": model.vocab: id ", id, " is used by '",
          model.id_to_token_[id], "' and '", token, "'"));
    }
    model.has_id_[id] = true;
    model.token_to_id_[token] = id;
    model.id_to_token_[id] = std::move(token);
  }
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  for (int b = 0; b < 256; ++b) {
    auto id = model.TokenToId(alphabet.ByteToUtf8(static_cast<uint8_t>(b)));
    model.byte_ids_[b] = id ? *id : -1;
  }
  if (options.unk_token) {
    auto id = model.TokenToId(*options.unk_token);
    if (!id) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": model.unk_token '", *options.unk_token,
          "' is not in model.vocab"));
    }
    model.unk_id_ = *id;
  }
  model.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto a = model.TokenToId(left);
    auto b = model.TokenToId(right);
    auto merged = model.TokenToId(absl::StrCat(left, right));
    if (!a || !b || !merged) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": model.merges[", rank, "] ('", left, "' '", right,
          "'): ", !a ? absl::StrCat("'", left, "'")
                     : !b ? absl::StrCat("'", right, "'")
                          : absl::StrCat("'", left, right, "'"),
          " is not in model.vocab"));
    }
    // The first (lowest) rank of a duplicated merge wins, as in HF.
    model.merges_.try_emplace(PairKey(*a, *b),
                              static_cast<int32_t>(rank), *merged);
  }
  return model;
}

std::optional<int32_t> BpeModel::TokenToId(absl::string_view token) const {
  auto it = token_to_id_.find(token);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || id >= id_end() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::EncodeWord(absl::string_view word, std::vector<int32_t>* ids,
                          MergeAlgorithm algorithm) const {
  if (options_.ignore_merges) {
    auto id = TokenToId(ByteLevelAlphabet::Get().Encode(word));
    if (id) {
      ids->push_back(*id);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  for (char c : word) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      symbols.push_back(id);
    } else if (unk_id_ >= 0) {
      // Unknown bytes become unk; with fuse_unk consecutive ones become one.
      // (They are never merged: no merge involves unk in practice, and HF
      // keeps unk symbols apart in the same way.)
      if (!(options_.fuse_unk && !symbols.empty() && symbols.back() == unk_id_)) {
        symbols.push_back(unk_id_);
      }
    }
  }
  if (symbols.size() > 1) {
    if (algorithm == MergeAlgorithm::kHeap ||
        (algorithm == MergeAlgorithm::kAuto &&
         symbols.size() > kQuadraticMaxSymbols)) {
      MergeHeap(&symbols);
    } else {
      MergeQuadratic(&symbols);
    }
  }
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

void BpeModel::MergeQuadratic(std::vector<int32_t>* symbols_ptr) const {
  std::vector<int32_t>& symbols = *symbols_ptr;
  // ranks[i]/merged[i]: the merge of the pair (symbols[i], symbols[i+1]).
  size_t n = symbols.size();
  int32_t ranks[kQuadraticMaxSymbols];
  int32_t merged[kQuadraticMaxSymbols];
  std::vector<int32_t> big_ranks, big_merged;
  int32_t* r = ranks;
  int32_t* m = merged;
  if (n > kQuadraticMaxSymbols) {  // only when forced by the tests
    big_ranks.resize(n);
    big_merged.resize(n);
    r = big_ranks.data();
    m = big_merged.data();
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    std::tie(r[i], m[i]) = FindMerge(symbols[i], symbols[i + 1]);
  }
  while (n > 1) {
    size_t best = n;
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (r[i] >= 0 && r[i] < best_rank) {
        best_rank = r[i];
        best = i;
      }
    }
    if (best == n) break;
    symbols[best] = m[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      symbols[i] = symbols[i + 1];
      r[i] = r[i + 1];
      m[i] = m[i + 1];
    }
    --n;
    if (best > 0) std::tie(r[best - 1], m[best - 1]) =
        FindMerge(symbols[best - 1], symbols[best]);
    if (best + 1 < n) std::tie(r[best], m[best]) =
        FindMerge(symbols[best], symbols[best + 1]);
  }
  symbols.resize(n);
}

void BpeModel::MergeHeap(std::vector<int32_t>* symbols_ptr) const {
  std::vector<int32_t>& symbols = *symbols_ptr;
  const int32_t n = static_cast<int32_t>(symbols.size());
  // A doubly linked list over positions; a merged-away symbol gets id -1.
  std::vector<int32_t> prev(n), next(n);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int32_t pos;    // left symbol
    int32_t left;   // ids at push time, to detect stale entries
    int32_t right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    const int32_t nxt = next[pos];
    if (nxt < 0) return;
    auto [rank, merged] = FindMerge(symbols[pos], symbols[nxt]);
    (void)merged;
    if (rank >= 0) heap.push({rank, pos, symbols[pos], symbols[nxt]});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const int32_t pos = top.pos;
    const int32_t nxt = next[pos];
    if (symbols[pos] != top.left || nxt < 0 || symbols[nxt] != top.right) {
      continue;  // stale: one side was merged since
    }
    symbols[pos] = FindMerge(top.left, top.right).second;
    symbols[nxt] = -1;
    next[pos] = next[nxt];
    if (next[pos] >= 0) prev[next[pos]] = pos;
    if (prev[pos] >= 0) push(prev[pos]);
    push(pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0 && i < n; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

}  // namespace tributary
