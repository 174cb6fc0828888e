#include "engine/scheduler/prefix_index.h"

#include <algorithm>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/scheduler/range_check.h"

namespace tributary {
namespace {

// Bounds that keep cached_bytes() and every count far from overflow: 2^31
// blocks of at most 2^30 bytes plus 2^20 checkpoints of at most 2^40 bytes.
constexpr int64_t kMaxKvBlockSize = 4096;
constexpr int64_t kMaxKvBlockBytes = int64_t{1} << 30;
constexpr int64_t kMaxCheckpointBytes = int64_t{1} << 40;
constexpr int64_t kMaxBudgetBytes = int64_t{1} << 62;
constexpr int64_t kMaxCheckpointSlots = int64_t{1} << 20;

}  // namespace

absl::Status PrefixIndexConfig::Validate() const {
  RETURN_IF_ERROR(
      CheckRange("kv_block_size", kv_block_size, 1, kMaxKvBlockSize));
  RETURN_IF_ERROR(
      CheckRange("kv_block_bytes", kv_block_bytes, 0, kMaxKvBlockBytes));
  RETURN_IF_ERROR(
      CheckRange("checkpoint_bytes", checkpoint_bytes, 1, kMaxCheckpointBytes));
  RETURN_IF_ERROR(CheckRange("max_checkpoint_bytes", max_checkpoint_bytes, 0,
                             kMaxBudgetBytes));
  if (max_checkpoint_bytes / checkpoint_bytes > kMaxCheckpointSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_checkpoint_bytes = ", max_checkpoint_bytes, " holds ",
                     max_checkpoint_bytes / checkpoint_bytes,
                     " checkpoints of checkpoint_bytes = ", checkpoint_bytes,
                     "; at most ", kMaxCheckpointSlots, " are supported"));
  }
  return absl::OkStatus();
}

int64_t PrefixIndexConfig::num_checkpoint_slots() const {
  return checkpoint_bytes > 0 ? max_checkpoint_bytes / checkpoint_bytes : 0;
}

void PrefixEvictions::Append(const PrefixEvictions& other) {
  kv_blocks.insert(kv_blocks.end(), other.kv_blocks.begin(),
                   other.kv_blocks.end());
  num_checkpoints += other.num_checkpoints;
}

size_t PrefixIndex::ChildKeyHash::operator()(const ChildKey& k) const {
  return (*this)(ChildKeyView{k.parent, k.tokens});
}

size_t PrefixIndex::ChildKeyHash::operator()(const ChildKeyView& k) const {
  return absl::HashOf(k.parent, k.tokens);
}

absl::StatusOr<std::unique_ptr<PrefixIndex>> PrefixIndex::Create(
    const PrefixIndexConfig& config) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  return std::unique_ptr<PrefixIndex>(new PrefixIndex(config));
}

PrefixIndex::PrefixIndex(const PrefixIndexConfig& config)
    : config_(config), num_checkpoint_slots_(config.num_checkpoint_slots()) {
  free_slots_.reserve(static_cast<size_t>(num_checkpoint_slots_));
  // Highest at the bottom, so that a fresh index hands out 0, 1, 2, … (as
  // the allocators do: plans stay easy to read in tests).
  for (int64_t s = num_checkpoint_slots_ - 1; s >= 0; --s) {
    free_slots_.push_back(static_cast<int32_t>(s));
  }
}

int32_t PrefixIndex::FindRoot(PrefixNamespace ns) const {
  auto it = roots_.find(ns);
  return it == roots_.end() ? -1 : it->second;
}

int32_t PrefixIndex::FindChild(int32_t parent,
                               absl::Span<const int32_t> tokens) const {
  auto it = children_.find(ChildKeyView{parent, tokens});
  return it == children_.end() ? -1 : it->second;
}

std::vector<int32_t> PrefixIndex::WalkPath(int32_t root,
                                           absl::Span<const int32_t> tokens,
                                           int64_t max_depth) const {
  std::vector<int32_t> path;
  if (root < 0) return path;
  const int64_t b = config_.kv_block_size;
  const int64_t depth_limit =
      std::min(max_depth, static_cast<int64_t>(tokens.size()) / b);
  int32_t node = root;
  for (int64_t d = 0; d < depth_limit; ++d) {
    node = FindChild(node, tokens.subspan(static_cast<size_t>(d * b),
                                          static_cast<size_t>(b)));
    if (node < 0) break;
    path.push_back(node);
  }
  return path;
}

CheckpointId PrefixIndex::FindCheckpointAt(
    int32_t node, absl::Span<const int32_t> tail) const {
  for (CheckpointId id : nodes_[node].checkpoints) {
    const Checkpoint& c = checkpoints_.find(id)->second;
    if (absl::Span<const int32_t>(c.tail) == tail) return id;
  }
  return kNoCheckpoint;
}

PrefixMatch PrefixIndex::Lookup(PrefixNamespace ns,
                                absl::Span<const int32_t> tokens,
                                int64_t max_num_tokens) const {
  PrefixMatch match;
  const int32_t root = FindRoot(ns);
  if (root < 0) return match;
  const int64_t b = config_.kv_block_size;
  const std::vector<int32_t> path =
      WalkPath(root, tokens, static_cast<int64_t>(tokens.size()) / b);
  match.num_block_tokens_matched = static_cast<int64_t>(path.size()) * b;
  const int64_t limit =
      std::min(max_num_tokens, static_cast<int64_t>(tokens.size()));
  // Deepest node first: any checkpoint at depth d (r in [d·B, d·B + B))
  // beats every one above it, so the first depth with a match wins, and
  // within it the longest tail.
  for (int64_t d = static_cast<int64_t>(path.size()); d >= 0; --d) {
    if (d * b > limit || (d == 0 && limit < 1)) continue;
    const Node& node = nodes_[d == 0 ? root : path[static_cast<size_t>(d - 1)]];
    CheckpointId best = kNoCheckpoint;
    int64_t best_tokens = 0;
    for (CheckpointId id : node.checkpoints) {
      const Checkpoint& c = checkpoints_.find(id)->second;
      const int64_t r = d * b + static_cast<int64_t>(c.tail.size());
      if (r > limit || r <= best_tokens) continue;
      if (absl::Span<const int32_t>(c.tail) !=
          tokens.subspan(static_cast<size_t>(d * b), c.tail.size())) {
        continue;
      }
      best = id;
      best_tokens = r;
    }
    if (best == kNoCheckpoint) continue;
    const Checkpoint& c = checkpoints_.find(best)->second;
    match.num_tokens = best_tokens;
    match.kv_blocks.reserve(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) {
      match.kv_blocks.push_back(nodes_[path[static_cast<size_t>(i)]].kv_block);
    }
    match.tail_kv_block = c.tail_kv_block;
    match.checkpoint = best;
    match.checkpoint_slot = c.slot;
    break;
  }
  return match;
}

bool PrefixIndex::ContainsCheckpoint(PrefixNamespace ns,
                                     absl::Span<const int32_t> tokens) const {
  const int32_t root = FindRoot(ns);
  if (root < 0 || tokens.empty()) return false;
  const int64_t b = config_.kv_block_size;
  const int64_t depth = static_cast<int64_t>(tokens.size()) / b;
  const std::vector<int32_t> path = WalkPath(root, tokens, depth);
  if (static_cast<int64_t>(path.size()) != depth) return false;
  const int32_t node = depth == 0 ? root : path.back();
  return FindCheckpointAt(node,
                          tokens.subspan(static_cast<size_t>(depth * b))) !=
         kNoCheckpoint;
}

void PrefixIndex::AdjustSubtreePins(Node& node, int64_t delta) {
  const bool was_free = node.subtree_pins == 0;
  node.subtree_pins += delta;
  const bool is_free = node.subtree_pins == 0;
  if (node.kv_block >= 0 && was_free != is_free) {
    num_evictable_kv_blocks_ += is_free ? 1 : -1;
  }
}

void PrefixIndex::PropagatePins(
    int32_t deepest, int64_t base_delta,
    absl::FunctionRef<int64_t(int32_t node)> own_delta) {
  int64_t carry = base_delta;
  for (int32_t n = deepest; n >= 0; n = nodes_[n].parent) {
    Node& node = nodes_[n];
    const int64_t own = own_delta(n);
    node.pin_count += own;
    carry += own;
    if (carry != 0) AdjustSubtreePins(node, carry);
  }
}

void PrefixIndex::SetCheckpointPins(Checkpoint& c, int64_t pin_count) {
  const bool was_pinned = c.pin_count > 0;
  c.pin_count = pin_count;
  const bool is_pinned = c.pin_count > 0;
  if (was_pinned == is_pinned) return;
  num_pinned_checkpoints_ += is_pinned ? 1 : -1;
  // A pinned checkpoint's tail block stays; an unpinned one's goes with it.
  if (c.tail_kv_block >= 0) num_evictable_kv_blocks_ += is_pinned ? -1 : 1;
}

void PrefixIndex::Touch(Checkpoint& c, CheckpointId id) {
  lru_.erase(c.lru);
  c.lru = lru_.insert(lru_.end(), id);
}

absl::Status PrefixIndex::Acquire(const PrefixMatch& match) {
  if (match.num_tokens == 0) return absl::OkStatus();
  auto it = checkpoints_.find(match.checkpoint);
  if (it == checkpoints_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", match.checkpoint, " is no longer cached"));
  }
  Checkpoint& c = it->second;
  const Node& at = nodes_[c.node];
  const int64_t r =
      at.depth * config_.kv_block_size + static_cast<int64_t>(c.tail.size());
  bool same = r == match.num_tokens && c.slot == match.checkpoint_slot &&
              c.tail_kv_block == match.tail_kv_block &&
              static_cast<int64_t>(match.kv_blocks.size()) == at.depth;
  for (int32_t n = c.node; same && nodes_[n].parent >= 0;
       n = nodes_[n].parent) {
    same = match.kv_blocks[static_cast<size_t>(nodes_[n].depth - 1)] ==
           nodes_[n].kv_block;
  }
  if (!same) {
    return absl::FailedPreconditionError(
        absl::StrCat("the match of checkpoint ", match.checkpoint,
                     " is stale: the index changed since Lookup"));
  }
  SetCheckpointPins(c, c.pin_count + 1);
  // The checkpoint's pin and one pin on every node of its path (not the
  // root, which has no block), in one walk up.
  PropagatePins(c.node, 1, [this](int32_t n) -> int64_t {
    return nodes_[n].parent >= 0 ? 1 : 0;
  });
  Touch(c, match.checkpoint);
  return absl::OkStatus();
}

absl::Status PrefixIndex::ReleaseCheckpoint(CheckpointId checkpoint) {
  auto it = checkpoints_.find(checkpoint);
  if (it == checkpoints_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", checkpoint, " is not cached"));
  }
  Checkpoint& c = it->second;
  if (c.pin_count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", checkpoint, " is not pinned"));
  }
  SetCheckpointPins(c, c.pin_count - 1);
  PropagatePins(c.node, -1, [](int32_t) -> int64_t { return 0; });
  return absl::OkStatus();
}

bool PrefixIndex::HasRoomForCheckpoint() const {
  return !free_slots_.empty() || num_checkpoints() > num_pinned_checkpoints_;
}

int32_t PrefixIndex::NewNode() {
  if (!free_nodes_.empty()) {
    const int32_t id = free_nodes_.back();
    free_nodes_.pop_back();
    nodes_[id] = Node{};
    nodes_[id].live = true;
    return id;
  }
  nodes_.emplace_back();
  nodes_.back().live = true;
  return static_cast<int32_t>(nodes_.size() - 1);
}

absl::StatusOr<PrefixInsertResult> PrefixIndex::Insert(
    const PrefixInsert& insert) {
  const int64_t b = config_.kv_block_size;
  const int64_t r = static_cast<int64_t>(insert.tokens.size());
  if (r < 1) {
    return absl::InvalidArgumentError("a checkpoint needs at least one token");
  }
  const int64_t depth = r / b;
  const int64_t tail_len = r % b;
  if (static_cast<int64_t>(insert.kv_blocks.size()) < depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_blocks holds ", insert.kv_blocks.size(),
                     " blocks; a checkpoint "
                     "after ",
                     r, " tokens needs the ", depth, " of its full blocks"));
  }
  if ((tail_len > 0) != (insert.tail_kv_block >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tail_kv_block = ", insert.tail_kv_block, " for a checkpoint after ", r,
        " tokens: a tail block is needed exactly when r % kv_block_size ", "(",
        tail_len, ") > 0"));
  }
  // Validate against the tree as it is, before anything changes: a block
  // may be a node only at its own position, and a tail is the index's alone.
  const int32_t root = FindRoot(insert.ns);
  const std::vector<int32_t> existing = WalkPath(root, insert.tokens, depth);
  for (int64_t d = 0; d < depth; ++d) {
    const int32_t block = insert.kv_blocks[static_cast<size_t>(d)];
    if (block < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv_blocks[", d, "] = ", block, " must be >= 0"));
    }
    if (checkpoint_of_tail_.contains(block)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kv_blocks[", d, "] = ", block, " is a checkpoint's tail block"));
    }
    auto held = node_of_block_.find(block);
    if (held != node_of_block_.end() &&
        (d >= static_cast<int64_t>(existing.size()) ||
         existing[static_cast<size_t>(d)] != held->second)) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv_blocks[", d, "] = ", block,
                       " is cached for another position or prefix"));
    }
  }
  if (insert.tail_kv_block >= 0) {
    const int32_t tail = insert.tail_kv_block;
    if (node_of_block_.contains(tail) || checkpoint_of_tail_.contains(tail)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tail_kv_block = ", tail, " is held by the index already"));
    }
    for (int64_t d = 0; d < depth; ++d) {
      if (insert.kv_blocks[static_cast<size_t>(d)] == tail) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tail_kv_block = ", tail, " is also kv_blocks[", d, "]"));
      }
    }
  }

  PrefixInsertResult result;
  const absl::Span<const int32_t> tail_tokens =
      insert.tokens.subspan(static_cast<size_t>(depth * b));
  if (static_cast<int64_t>(existing.size()) == depth) {
    const int32_t node = depth == 0 ? root : existing.back();
    if (node >= 0) {
      const CheckpointId id = FindCheckpointAt(node, tail_tokens);
      if (id != kNoCheckpoint) {
        result.duplicate = true;
        result.checkpoint = id;
        Touch(checkpoints_.find(id)->second, id);
        return result;
      }
    }
  }
  if (free_slots_.empty() && !EvictLeastRecentlyUsed(&result.evicted)) {
    return result;  // every checkpoint is pinned (or there are no slots)
  }

  // The eviction may have pruned nodes of `existing`: walk again, creating
  // the missing nodes from the caller's blocks (once a node is missing,
  // every deeper one is).
  int32_t node = FindRoot(insert.ns);
  if (node < 0) {
    node = NewNode();
    nodes_[node].ns = insert.ns;
    roots_[insert.ns] = node;
  }
  int64_t first_new_depth = depth + 1;  // depth of the first node created
  for (int64_t d = 0; d < depth; ++d) {
    const absl::Span<const int32_t> block_tokens = insert.tokens.subspan(
        static_cast<size_t>(d * b), static_cast<size_t>(b));
    const int32_t child = FindChild(node, block_tokens);
    if (child >= 0) {
      node = child;
      continue;
    }
    const int32_t block = insert.kv_blocks[static_cast<size_t>(d)];
    const int32_t id = NewNode();
    Node& n = nodes_[id];
    n.ns = insert.ns;
    n.parent = node;
    n.kv_block = block;
    n.depth = d + 1;
    n.tokens.assign(block_tokens.begin(), block_tokens.end());
    ++nodes_[node].num_children;
    children_.emplace(ChildKey{node, n.tokens}, id);
    node_of_block_.emplace(block, id);
    ++num_node_blocks_;
    ++num_evictable_kv_blocks_;  // subtree_pins = 0 until the pins below
    result.adopted_kv_blocks.push_back(block);
    if (first_new_depth > depth) first_new_depth = d + 1;
    node = id;
  }

  const CheckpointId id = next_checkpoint_++;
  Checkpoint c;
  c.node = node;
  c.tail.assign(tail_tokens.begin(), tail_tokens.end());
  c.tail_kv_block = insert.tail_kv_block;
  c.slot = free_slots_.back();
  free_slots_.pop_back();
  c.lru = lru_.insert(lru_.end(), id);
  if (c.tail_kv_block >= 0) {
    checkpoint_of_tail_.emplace(c.tail_kv_block, id);
    ++num_tail_blocks_;
    ++num_evictable_kv_blocks_;  // unpinned
    result.adopted_kv_blocks.push_back(c.tail_kv_block);
  }
  nodes_[node].checkpoints.push_back(id);
  result.inserted = true;
  result.checkpoint = id;
  result.checkpoint_slot = c.slot;
  checkpoints_.emplace(id, std::move(c));

  // The adopted blocks are the inserting sequence's: pinned by it.
  if (first_new_depth <= depth) {
    PropagatePins(node, 0, [this, first_new_depth](int32_t n) -> int64_t {
      return nodes_[n].parent >= 0 && nodes_[n].depth >= first_new_depth ? 1
                                                                         : 0;
    });
  }
  return result;
}

absl::Status PrefixIndex::UnpinKvBlocks(absl::Span<const int32_t> block_table,
                                        PrefixEvictions* released) {
  // The table's blocks the index holds as nodes, with how often each occurs
  // (once, in a well-formed table; counting keeps a repeat an error rather
  // than a silent double unpin).
  absl::flat_hash_map<int32_t, int64_t> unpins;  // node -> count
  int32_t deepest = -1;
  for (int32_t block : block_table) {
    auto it = node_of_block_.find(block);
    if (it == node_of_block_.end()) continue;
    const int32_t n = it->second;
    if (++unpins[n] > nodes_[n].pin_count) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kv block ", block, " is not pinned (", nodes_[n].pin_count,
          " pins) but a leaving sequence holds it"));
    }
    if (deepest < 0 || nodes_[n].depth > nodes_[deepest].depth) deepest = n;
  }
  if (unpins.empty()) return absl::OkStatus();
  // A sequence's cached blocks lie on its own token path, so one walk up
  // from the deepest visits them all. Should they not (the table is not one
  // sequence's), each gets its own walk: slower, as correct.
  int64_t on_path = 0;
  for (int32_t n = deepest; n >= 0; n = nodes_[n].parent) {
    if (unpins.contains(n)) ++on_path;
  }
  if (on_path == static_cast<int64_t>(unpins.size())) {
    PropagatePins(deepest, 0, [&unpins](int32_t n) -> int64_t {
      auto it = unpins.find(n);
      return it == unpins.end() ? 0 : -it->second;
    });
    PruneUpward(deepest, released);
    return absl::OkStatus();
  }
  std::vector<std::pair<int32_t, int64_t>> each(unpins.begin(), unpins.end());
  std::sort(each.begin(), each.end());  // a fixed order: deterministic ids
  for (const auto& [n, count] : each) {
    PropagatePins(n, 0, [n = n, count = count](int32_t m) -> int64_t {
      return m == n ? -count : 0;
    });
  }
  for (const auto& entry : each) {
    if (nodes_[entry.first].live) PruneUpward(entry.first, released);
  }
  return absl::OkStatus();
}

void PrefixIndex::PruneUpward(int32_t node, PrefixEvictions* released) {
  while (node >= 0) {
    Node& n = nodes_[node];
    if (n.num_children > 0 || !n.checkpoints.empty() || n.pin_count > 0) {
      return;
    }
    const int32_t parent = n.parent;
    if (parent < 0) {
      roots_.erase(n.ns);  // an empty namespace is forgotten
    } else {
      children_.erase(ChildKeyView{parent, n.tokens});
      node_of_block_.erase(n.kv_block);
      released->kv_blocks.push_back(n.kv_block);
      --num_node_blocks_;
      --num_evictable_kv_blocks_;  // subtree_pins was 0: it was counted
      --nodes_[parent].num_children;
    }
    n = Node{};  // live = false, storage released
    free_nodes_.push_back(node);
    node = parent;
  }
}

void PrefixIndex::EvictCheckpoint(CheckpointId id, PrefixEvictions* released) {
  auto it = checkpoints_.find(id);
  Checkpoint& c = it->second;
  const int32_t node = c.node;
  std::vector<CheckpointId>& list = nodes_[node].checkpoints;
  list.erase(std::find(list.begin(), list.end(), id));
  lru_.erase(c.lru);
  free_slots_.push_back(c.slot);
  if (c.tail_kv_block >= 0) {
    checkpoint_of_tail_.erase(c.tail_kv_block);
    released->kv_blocks.push_back(c.tail_kv_block);
    --num_tail_blocks_;
    --num_evictable_kv_blocks_;  // unpinned: it was counted
  }
  checkpoints_.erase(it);
  ++released->num_checkpoints;
  ++num_evicted_total_;
  PruneUpward(node, released);
}

bool PrefixIndex::EvictLeastRecentlyUsed(PrefixEvictions* released) {
  for (CheckpointId id : lru_) {
    if (checkpoints_.find(id)->second.pin_count > 0) continue;
    EvictCheckpoint(id, released);
    return true;
  }
  return false;
}

PrefixEvictions PrefixIndex::EvictForKvBlocks(int64_t num_kv_blocks) {
  PrefixEvictions released;
  while (static_cast<int64_t>(released.kv_blocks.size()) < num_kv_blocks &&
         num_evictable_kv_blocks_ > 0 && EvictLeastRecentlyUsed(&released)) {
  }
  return released;
}

PrefixEvictions PrefixIndex::EvictAll() {
  PrefixEvictions released;
  while (EvictLeastRecentlyUsed(&released)) {
  }
  return released;
}

int64_t PrefixIndex::cached_bytes() const {
  return num_kv_blocks() * config_.kv_block_bytes +
         num_checkpoints() * config_.checkpoint_bytes;
}

int64_t PrefixIndex::checkpoint_capacity_bytes() const {
  return num_checkpoint_slots_ * config_.checkpoint_bytes;
}

bool PrefixIndex::HoldsKvBlock(int32_t block) const {
  return node_of_block_.contains(block) || checkpoint_of_tail_.contains(block);
}

int64_t PrefixIndex::KvBlockPinCount(int32_t block) const {
  auto it = node_of_block_.find(block);
  return it == node_of_block_.end() ? 0 : nodes_[it->second].pin_count;
}

std::vector<int32_t> PrefixIndex::HeldKvBlocks() const {
  std::vector<int32_t> blocks;
  blocks.reserve(static_cast<size_t>(num_kv_blocks()));
  for (const auto& [block, node] : node_of_block_) blocks.push_back(block);
  for (const auto& [block, id] : checkpoint_of_tail_) blocks.push_back(block);
  std::sort(blocks.begin(), blocks.end());
  return blocks;
}

}  // namespace tributary
