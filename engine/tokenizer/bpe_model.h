// The BPE model of HF tokenizers for byte-level vocabularies: a word (one
// pre-tokenized piece, as raw bytes) starts as one symbol per byte (the
// byte-level character of each byte looked up in the vocabulary) and the
// adjacent pair with the lowest merge rank (leftmost on ties) is merged
// until no pair has a merge.
//
// Immutable after Create(); all methods are const and thread-safe.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_BPE_MODEL_H_
#define TRIBUTARY_ENGINE_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

class BpeModel {
 public:
  struct Options {
    // HF `ignore_merges`: a word that is itself in the vocabulary is one
    // token without merging.
    bool ignore_merges = false;
    // HF `unk_token` / `fuse_unk`: bytes whose character is not in the
    // vocabulary become the unknown token; without one they are dropped,
    // as HF does.
    std::optional<std::string> unk_token;
    bool fuse_unk = false;
  };
  // Which merge loop to run (kAuto picks by word length). Exposed so that
  // the tests can hold the two against each other.
  enum class MergeAlgorithm { kAuto, kQuadratic, kHeap };

  // `vocab`: token (byte-level string) -> id. `merges`: pairs in rank order.
  // Errors: a merge whose parts or result are not in the vocabulary, a
  // duplicate id, an unknown unk_token. `source` prefixes error messages.
  static absl::StatusOr<BpeModel> Create(
      std::vector<std::pair<std::string, int32_t>> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges,
      const Options& options, absl::string_view source);

  // Appends the ids of one word (raw bytes). Cost: O(n log n) in the
  // number of bytes, O(n^2) with tiny constants for short words.
  void EncodeWord(absl::string_view word, std::vector<int32_t>* ids,
                  MergeAlgorithm algorithm = MergeAlgorithm::kAuto) const;

  std::optional<int32_t> TokenToId(absl::string_view token) const;
  // The byte-level string of `id`, or nullptr when `id` is not in the model.
  const std::string* IdToToken(int32_t id) const;
  // One past the largest id of the model.
  int32_t id_end() const { return static_cast<int32_t>(id_to_token_.size()); }
  size_t num_merges() const { return merges_.size(); }

 private:
  BpeModel() = default;
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
           static_cast<uint32_t>(b);
  }
  // Rank and merged id of the pair, or rank -1.
  std::pair<int32_t, int32_t> FindMerge(int32_t a, int32_t b) const {
    auto it = merges_.find(PairKey(a, b));
    if (it == merges_.end()) return {-1, -1};
    return it->second;
  }
  void MergeQuadratic(std::vector<int32_t>* symbols) const;
  void MergeHeap(std::vector<int32_t>* symbols) const;

  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  std::vector<std::string> id_to_token_;  // "" for holes
  std::vector<bool> has_id_;
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::array<int32_t, 256> byte_ids_{};  // -1 when not in the vocabulary
  Options options_;
  int32_t unk_id_ = -1;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_BPE_MODEL_H_
