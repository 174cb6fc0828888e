// The prefix cache's index (docs/prefix-cache.md): which token prefixes have
// cached KV blocks and GDN state checkpoints, as pure bookkeeping. No
// backend, no allocator: the index records block ids and checkpoint slots
// and tells its caller (the scheduler) which references it takes and which
// it gives back, so that the BlockAllocator's counts stay exact.
//
// Shape: per namespace, a tree of full KV blocks (a node = one block of
// kv_block_size token ids, reached from its parent by exactly those ids;
// vLLM's hash chain of blocks, kept as a tree so that eviction can prune
// from the leaves). A checkpoint of the recurrent state after r tokens,
// r = n·B + t (B = kv_block_size, 0 <= t < B), hangs on the node of depth n
// (the root for n = 0) with its t tail token ids; for t > 0 it owns a tail
// block whose first t rows hold the KV of positions [n·B, r). A cached
// prefix is usable up to the deepest checkpoint whose tokens match: both its
// KV and its state exist exactly there. Keys are compared token for token,
// never by hash alone, so a hit is never a collision.
//
// References and pins:
//  - The index holds one reference to each block it keeps: every node's block
//    (shared with the sequences that attach it, copy-free) and every tail
//    block (its checkpoint's alone: a hit copies it). Insert reports the
//    blocks it takes a reference to (the caller increments them); evictions
//    report the blocks it gives up (the caller frees them).
//  - A node's pin count is the number of live sequences whose block table
//    holds the node's block: Acquire pins a hit's path, Insert pins the
//    blocks it adopts from the inserting sequence, UnpinKvBlocks (when a
//    sequence leaves) unpins. A pinned node is never removed, so a block a
//    live sequence uses is never counted as released, and neither are its
//    ancestors (the only way to reach it).
//  - A checkpoint's pin count covers the window between Acquire and the
//    copy of its state into the sequence's slot (ReleaseCheckpoint): a
//    pinned checkpoint is never evicted. The live sequence's own state is in
//    its own slot, so a checkpoint is pinned for one step, not a lifetime.
// Eviction is by least recent use (Insert and Acquire are uses) of unpinned
// checkpoints; evicting one prunes the nodes no checkpoint and no pin needs
// anymore. Every leaf node therefore has a checkpoint or a pin (blocks deeper
// than every checkpoint are of no use to a hybrid model: without a state
// there, the prefix has to be recomputed anyway).
//
// Checkpoint slots: the index owns num_checkpoint_slots() slots, numbered
// 0 … n − 1 (the engine maps them to rows of the state pools past the live
// slots), so its memory is fixed by PrefixIndexConfig::max_checkpoint_bytes.
//
// Thread safety: none (the engine thread owns it). Costs: Lookup, Contains
// and Insert O(tokens + checkpoints on the path); Acquire, ReleaseCheckpoint
// and UnpinKvBlocks O(depth of the path); an eviction O(pinned checkpoints
// skipped + nodes pruned).
#ifndef TRIBUTARY_ENGINE_SCHEDULER_PREFIX_INDEX_H_
#define TRIBUTARY_ENGINE_SCHEDULER_PREFIX_INDEX_H_

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tributary {

// Separates streams that must never share entries. The engine uses
// kPlainNamespace only: requests that change the residual stream bypass the
// cache (docs/prefix-cache.md), but the index keys any namespace so that a
// keyed mode needs no new structure.
using PrefixNamespace = uint64_t;
inline constexpr PrefixNamespace kPlainNamespace = 0;

// A checkpoint's handle: unique for the index's lifetime, never reused, so a
// stale handle is an error rather than another entry.
using CheckpointId = int64_t;
inline constexpr CheckpointId kNoCheckpoint = -1;

struct PrefixIndexConfig {
  int64_t kv_block_size = 16;  // tokens per KV block (SchedulerConfig's)
  // One KV block in every attention layer, and one checkpoint (conv window
  // and recurrent state of every GDN layer): for cached_bytes() only, apart
  // from checkpoint_bytes sizing the budget.
  int64_t kv_block_bytes = 0;
  int64_t checkpoint_bytes = 1;
  // The checkpoints' memory: floor(max_checkpoint_bytes / checkpoint_bytes)
  // slots. 0 turns checkpoints, and so the cache, off (Insert never
  // inserts). Cached KV blocks live in the KV pool's free part and have no
  // budget of their own: live sequences evict them (EvictForKvBlocks).
  int64_t max_checkpoint_bytes = 0;

  // INVALID_ARGUMENT naming the first field out of range.
  absl::Status Validate() const;
  int64_t num_checkpoint_slots() const;
};

// What Lookup found: the deepest cached prefix usable for `tokens`.
struct PrefixMatch {
  // r: positions [0, r) are cached, KV and state. 0 = a miss, and every
  // other field is empty.
  int64_t num_tokens = 0;
  // The r / B full blocks of positions [0, r / B · B), to share by
  // reference (the caller increments each for its block table).
  std::vector<int32_t> kv_blocks;
  // When r % B > 0: the block whose first r % B rows hold positions
  // [r / B · B, r); the caller copies it into a block of its own (the rows
  // past r % B are not the prefix's). Else -1.
  int32_t tail_kv_block = -1;
  // The state after r tokens, to copy into the sequence's own state slot.
  CheckpointId checkpoint = kNoCheckpoint;
  int32_t checkpoint_slot = -1;
  // Tokens of the deepest run of full blocks of `tokens` the tree holds,
  // checkpoint or not (>= r / B · B): a deeper one than the hit is where a
  // checkpoint would pay (a branch point, docs/prefix-cache.md).
  int64_t num_block_tokens_matched = 0;
};

// What an eviction or an unpin gave up.
struct PrefixEvictions {
  // Blocks the index no longer references: the caller frees each once.
  std::vector<int32_t> kv_blocks;
  int64_t num_checkpoints = 0;  // checkpoints evicted

  void Append(const PrefixEvictions& other);
};

// A checkpoint to insert: the state after `tokens` (r >= 1 of them).
struct PrefixInsert {
  PrefixNamespace ns = kPlainNamespace;
  absl::Span<const int32_t> tokens;
  // The inserting sequence's block table: at least r / B blocks, those of
  // positions [0, r / B · B) (later entries are ignored). The sequence
  // holds them; the blocks the index adopts become pinned by it.
  absl::Span<const int32_t> kv_blocks;
  // Exactly when r % B > 0: a block that no live sequence writes again (a
  // copy made for the index, or the last block of a finishing sequence)
  // whose first r % B rows hold positions [r / B · B, r). The index takes a
  // reference to it when the checkpoint is inserted.
  int32_t tail_kv_block = -1;
};

struct PrefixInsertResult {
  // False when an equal checkpoint exists (`duplicate`: it becomes the most
  // recently used) or when every slot holds a pinned checkpoint; then
  // nothing else changed and no reference was taken.
  bool inserted = false;
  bool duplicate = false;
  CheckpointId checkpoint = kNoCheckpoint;  // the new (or equal) one
  // Where the caller copies the state (inserted only). It is a valid
  // checkpoint once that copy has run: the caller orders it before any
  // copy out of the slot (Lookup may find the entry at once).
  int32_t checkpoint_slot = -1;
  // The blocks the index took a reference to (new nodes' blocks, then the
  // tail block): the caller increments each.
  std::vector<int32_t> adopted_kv_blocks;
  // What was evicted to make room.
  PrefixEvictions evicted;
};

class PrefixIndex {
 public:
  // Validates `config` (INVALID_ARGUMENT naming the field).
  static absl::StatusOr<std::unique_ptr<PrefixIndex>> Create(
      const PrefixIndexConfig& config);

  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  // The deepest checkpoint in `ns` whose tokens are a prefix of `tokens`,
  // with r <= max_num_tokens (a sequence passes its length − 1: its last
  // token must be computed for its logits). Changes nothing.
  PrefixMatch Lookup(PrefixNamespace ns, absl::Span<const int32_t> tokens,
                     int64_t max_num_tokens) const;

  // Whether a checkpoint after exactly `tokens` is cached.
  bool ContainsCheckpoint(PrefixNamespace ns,
                          absl::Span<const int32_t> tokens) const;

  // A sequence takes `match` (from Lookup, with no change to the index
  // since): its checkpoint is pinned until ReleaseCheckpoint and becomes the
  // most recently used; every block of match.kv_blocks is pinned for the
  // sequence (until UnpinKvBlocks). A miss is a no-op. NOT_FOUND for a
  // checkpoint no longer cached, FAILED_PRECONDITION for a match that does
  // not describe it anymore; nothing changes then.
  absl::Status Acquire(const PrefixMatch& match);

  // Ends an Acquire's pin of `checkpoint` (its state was copied).
  // NOT_FOUND for an unknown one, FAILED_PRECONDITION if it is not pinned.
  absl::Status ReleaseCheckpoint(CheckpointId checkpoint);

  // Inserts a checkpoint (see PrefixInsert), evicting the least recently
  // used unpinned one when every slot is taken. INVALID_ARGUMENT (and no
  // change) for empty tokens, too few blocks, a negative block id, a tail
  // block given when r % B == 0 or missing when r % B > 0, a block the index
  // holds at another position (or as a tail), a tail block the index holds
  // or that is among kv_blocks.
  absl::StatusOr<PrefixInsertResult> Insert(const PrefixInsert& insert);

  // Whether an Insert of a new checkpoint would find a slot (free, or taken
  // by an unpinned checkpoint it may evict): lets the caller skip the copy
  // of a tail block that could not be used.
  bool HasRoomForCheckpoint() const;

  // A sequence leaves (finished, cancelled or preempted): unpins each block
  // of its block table that is a node of the index (other blocks are not the
  // index's business, and are ignored), then prunes the nodes that nothing
  // needs anymore, returned in `released` (appended). FAILED_PRECONDITION
  // (and no change) when such a block is not pinned.
  absl::Status UnpinKvBlocks(absl::Span<const int32_t> block_table,
                             PrefixEvictions* released);

  // Evicts the least recently used unpinned checkpoint and what only it
  // needed (appended to `released`). False when every checkpoint is pinned
  // or there is none.
  bool EvictLeastRecentlyUsed(PrefixEvictions* released);
  // Evicts in that order until at least `num_kv_blocks` blocks have been
  // given up or nothing is left to evict: live sequences' claim on the KV
  // pool. Succeeds fully iff num_kv_blocks <= num_evictable_kv_blocks().
  PrefixEvictions EvictForKvBlocks(int64_t num_kv_blocks);
  // Evicts every unpinned checkpoint.
  PrefixEvictions EvictAll();

  // --- Accounting (exact, O(1)) ---------------------------------------------
  int64_t num_checkpoints() const {
    return static_cast<int64_t>(checkpoints_.size());
  }
  int64_t num_pinned_checkpoints() const { return num_pinned_checkpoints_; }
  int64_t num_checkpoint_slots() const { return num_checkpoint_slots_; }
  // Blocks the index holds a reference to: nodes' and tails'.
  int64_t num_kv_blocks() const { return num_node_blocks_ + num_tail_blocks_; }
  int64_t num_nodes() const { return num_node_blocks_; }  // roots excluded
  // Blocks that evicting every unpinned checkpoint would give up: what the
  // cache can return to live sequences now.
  int64_t num_evictable_kv_blocks() const { return num_evictable_kv_blocks_; }
  // num_kv_blocks() · kv_block_bytes + num_checkpoints() · checkpoint_bytes.
  int64_t cached_bytes() const;
  // num_checkpoint_slots() · checkpoint_bytes.
  int64_t checkpoint_capacity_bytes() const;
  int64_t num_evicted_checkpoints_total() const { return num_evicted_total_; }

  // Whether `block` is a node's or a tail's (for the scheduler's audit).
  bool HoldsKvBlock(int32_t block) const;
  // A node block's pin count; 0 for a tail block or one the index does not
  // hold.
  int64_t KvBlockPinCount(int32_t block) const;
  // Every block the index references, ascending.
  std::vector<int32_t> HeldKvBlocks() const;

  const PrefixIndexConfig& config() const { return config_; }

  // Recomputes everything kept incrementally (pins per subtree, evictable
  // blocks, counts, maps, slots, the LRU list) and checks that no node is
  // prunable. O(size of the index): tests and debug checks. INTERNAL
  // describing the first violation.
  absl::Status CheckInvariants() const;

 private:
  struct Node {
    bool live = false;
    PrefixNamespace ns = kPlainNamespace;
    int32_t parent = -1;    // -1 for a root
    int32_t kv_block = -1;  // -1 for a root
    int64_t depth = 0;      // full blocks from the root
    int64_t num_children = 0;
    int64_t pin_count = 0;
    // Node pins and checkpoint pins in this node's subtree, its own
    // included: the node's block is evictable exactly when this is 0.
    int64_t subtree_pins = 0;
    std::vector<int32_t> tokens;  // [kv_block_size]; empty for a root
    std::vector<CheckpointId> checkpoints;
  };
  struct Checkpoint {
    int32_t node = -1;
    std::vector<int32_t> tail;  // [r % B]
    int32_t tail_kv_block = -1;
    int32_t slot = -1;
    int64_t pin_count = 0;
    std::list<CheckpointId>::iterator lru;
  };
  // A child edge: the parent node and the block's token ids. The map owns
  // the ids; lookups pass a view (heterogeneous lookup, no copy).
  struct ChildKey {
    int32_t parent = -1;
    std::vector<int32_t> tokens;
  };
  struct ChildKeyView {
    int32_t parent = -1;
    absl::Span<const int32_t> tokens;
  };
  struct ChildKeyHash {
    using is_transparent = void;
    size_t operator()(const ChildKey& k) const;
    size_t operator()(const ChildKeyView& k) const;
  };
  struct ChildKeyEq {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return a.parent == b.parent && absl::Span<const int32_t>(a.tokens) ==
                                         absl::Span<const int32_t>(b.tokens);
    }
  };

  explicit PrefixIndex(const PrefixIndexConfig& config);

  int32_t FindRoot(PrefixNamespace ns) const;
  int32_t FindChild(int32_t parent, absl::Span<const int32_t> tokens) const;
  // The nodes of the full blocks of `tokens` the tree holds under `root`,
  // depth 1 first, at most max_depth of them.
  std::vector<int32_t> WalkPath(int32_t root, absl::Span<const int32_t> tokens,
                                int64_t max_depth) const;
  // The checkpoint at `node` whose tail is `tail`, or kNoCheckpoint.
  CheckpointId FindCheckpointAt(int32_t node,
                                absl::Span<const int32_t> tail) const;
  int32_t NewNode();
  // Adds own_delta(n) to the pin count of each node n from `deepest` to its
  // root, plus `base_delta` (a checkpoint's pin at `deepest`), and keeps
  // every subtree_pins and num_evictable_kv_blocks_ in step.
  void PropagatePins(int32_t deepest, int64_t base_delta,
                     absl::FunctionRef<int64_t(int32_t node)> own_delta);
  void AdjustSubtreePins(Node& node, int64_t delta);
  void SetCheckpointPins(Checkpoint& c, int64_t pin_count);
  // Removes `node` and then its ancestors while each is a leaf with no
  // checkpoint and no pin; an emptied root is forgotten too.
  void PruneUpward(int32_t node, PrefixEvictions* released);
  void EvictCheckpoint(CheckpointId id, PrefixEvictions* released);
  void Touch(Checkpoint& c, CheckpointId id);

  PrefixIndexConfig config_;
  int64_t num_checkpoint_slots_ = 0;
  std::vector<Node> nodes_;  // by node id; dead ones are on free_nodes_
  std::vector<int32_t> free_nodes_;
  absl::flat_hash_map<PrefixNamespace, int32_t> roots_;
  absl::flat_hash_map<ChildKey, int32_t, ChildKeyHash, ChildKeyEq> children_;
  absl::flat_hash_map<int32_t, int32_t> node_of_block_;
  absl::flat_hash_map<int32_t, CheckpointId> checkpoint_of_tail_;
  absl::flat_hash_map<CheckpointId, Checkpoint> checkpoints_;
  std::list<CheckpointId> lru_;      // the front is the least recently used
  std::vector<int32_t> free_slots_;  // a stack; the back is taken first
  CheckpointId next_checkpoint_ = 0;
  int64_t num_node_blocks_ = 0;
  int64_t num_tail_blocks_ = 0;
  int64_t num_evictable_kv_blocks_ = 0;
  int64_t num_pinned_checkpoints_ = 0;
  int64_t num_evicted_total_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SCHEDULER_PREFIX_INDEX_H_
