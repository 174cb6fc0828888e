// PrefixIndex::CheckInvariants: the audit of everything the index keeps
// incrementally, apart from the structure because only tests and debug
// checks call it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/scheduler/prefix_index.h"  // IWYU pragma: associated

namespace tributary {

absl::Status PrefixIndex::CheckInvariants() const {
  const int64_t b = config_.kv_block_size;
  const size_t num = nodes_.size();
  std::vector<int64_t> children(num, 0);
  std::vector<int64_t> own_pins(num, 0);
  int64_t num_live = 0, num_blocks = 0;
  for (size_t i = 0; i < num; ++i) {
    const Node& n = nodes_[i];
    if (!n.live) continue;
    ++num_live;
    own_pins[i] = n.pin_count;
    if (n.pin_count < 0) {
      return absl::InternalError(absl::StrCat("node ", i, " pin count < 0"));
    }
    if (n.parent < 0) {
      auto root = roots_.find(n.ns);
      if (root == roots_.end() || root->second != static_cast<int32_t>(i) ||
          n.kv_block != -1 || n.depth != 0 || !n.tokens.empty() ||
          n.pin_count != 0) {
        return absl::InternalError(
            absl::StrCat("root ", i, " is not its namespace's root"));
      }
      continue;
    }
    ++num_blocks;
    if (static_cast<size_t>(n.parent) >= num || !nodes_[n.parent].live) {
      return absl::InternalError(
          absl::StrCat("node ", i, " has a dead parent ", n.parent));
    }
    const Node& p = nodes_[n.parent];
    ++children[n.parent];
    if (p.ns != n.ns || n.depth != p.depth + 1 ||
        static_cast<int64_t>(n.tokens.size()) != b || n.kv_block < 0) {
      return absl::InternalError(
          absl::StrCat("node ", i, " disagrees with its parent ", n.parent));
    }
    if (FindChild(n.parent, n.tokens) != static_cast<int32_t>(i)) {
      return absl::InternalError(
          absl::StrCat("node ", i, " is not its parent's child"));
    }
    auto held = node_of_block_.find(n.kv_block);
    if (held == node_of_block_.end() ||
        held->second != static_cast<int32_t>(i)) {
      return absl::InternalError(absl::StrCat("node ", i, " block ", n.kv_block,
                                              " is not mapped to it"));
    }
    if (checkpoint_of_tail_.contains(n.kv_block)) {
      return absl::InternalError(absl::StrCat(
          "block ", n.kv_block, " is both a node and a tail block"));
    }
  }
  if (num_blocks != num_node_blocks_ ||
      static_cast<int64_t>(children_.size()) != num_blocks ||
      static_cast<int64_t>(node_of_block_.size()) != num_blocks ||
      num_live + static_cast<int64_t>(free_nodes_.size()) !=
          static_cast<int64_t>(num) ||
      static_cast<int64_t>(roots_.size()) != num_live - num_blocks) {
    return absl::InternalError(absl::StrCat(
        num_blocks, " node blocks, count ", num_node_blocks_, ", ",
        children_.size(), " edges, ", node_of_block_.size(), " mapped, ",
        roots_.size(), " roots of ", num_live, " live nodes"));
  }

  std::vector<bool> slot_used(static_cast<size_t>(num_checkpoint_slots_),
                              false);
  int64_t num_pinned = 0, num_tails = 0, num_unpinned_tails = 0;
  absl::flat_hash_set<CheckpointId> listed;
  for (size_t i = 0; i < num; ++i) {
    if (!nodes_[i].live) continue;
    for (CheckpointId id : nodes_[i].checkpoints) {
      auto it = checkpoints_.find(id);
      if (it == checkpoints_.end() ||
          it->second.node != static_cast<int32_t>(i) ||
          !listed.insert(id).second) {
        return absl::InternalError(absl::StrCat(
            "node ", i, " lists checkpoint ", id, " that is not its own"));
      }
    }
  }
  for (const auto& [id, c] : checkpoints_) {
    if (!listed.contains(id)) {
      return absl::InternalError(
          absl::StrCat("checkpoint ", id, " is on no node's list"));
    }
    const Node& n = nodes_[c.node];
    const int64_t r = n.depth * b + static_cast<int64_t>(c.tail.size());
    if (static_cast<int64_t>(c.tail.size()) >= b || r < 1 ||
        (c.tail.empty() != (c.tail_kv_block < 0))) {
      return absl::InternalError(
          absl::StrCat("checkpoint ", id, " has a tail of ", c.tail.size(),
                       " tokens and tail block ", c.tail_kv_block));
    }
    if (c.slot < 0 || c.slot >= num_checkpoint_slots_ || slot_used[c.slot]) {
      return absl::InternalError(absl::StrCat(
          "checkpoint ", id, " slot ", c.slot, " is out of range or shared"));
    }
    slot_used[c.slot] = true;
    if (c.pin_count < 0 || *c.lru != id) {
      return absl::InternalError(
          absl::StrCat("checkpoint ", id, " pin count or LRU entry is wrong"));
    }
    if (c.pin_count > 0) ++num_pinned;
    own_pins[c.node] += c.pin_count;
    if (c.tail_kv_block >= 0) {
      ++num_tails;
      if (c.pin_count == 0) ++num_unpinned_tails;
      auto t = checkpoint_of_tail_.find(c.tail_kv_block);
      if (t == checkpoint_of_tail_.end() || t->second != id) {
        return absl::InternalError(absl::StrCat("checkpoint ", id,
                                                " tail block ", c.tail_kv_block,
                                                " is not mapped to it"));
      }
    }
  }
  if (num_pinned != num_pinned_checkpoints_ || num_tails != num_tail_blocks_ ||
      static_cast<int64_t>(checkpoint_of_tail_.size()) != num_tails ||
      lru_.size() != checkpoints_.size() ||
      next_checkpoint_ < static_cast<int64_t>(checkpoints_.size())) {
    return absl::InternalError(absl::StrCat(
        num_pinned, " pinned checkpoints, count ", num_pinned_checkpoints_,
        "; ", num_tails, " tails, count ", num_tail_blocks_, "; LRU holds ",
        lru_.size(), " of ", checkpoints_.size()));
  }
  for (int32_t s : free_slots_) {
    if (s < 0 || s >= num_checkpoint_slots_ || slot_used[s]) {
      return absl::InternalError(
          absl::StrCat("free checkpoint slot ", s, " is out of range or used"));
    }
    slot_used[s] = true;
  }
  if (static_cast<int64_t>(free_slots_.size() + checkpoints_.size()) !=
      num_checkpoint_slots_) {
    return absl::InternalError(
        absl::StrCat(free_slots_.size(), " free + ", checkpoints_.size(),
                     " used checkpoint slots != ", num_checkpoint_slots_));
  }

  // Pins per subtree, deepest nodes first, so each child is done before its
  // parent.
  std::vector<int32_t> order;
  for (size_t i = 0; i < num; ++i) {
    if (nodes_[i].live) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [this](int32_t x, int32_t y) {
    return nodes_[x].depth > nodes_[y].depth;
  });
  std::vector<int64_t> subtree = own_pins;
  int64_t num_evictable = num_unpinned_tails;
  for (int32_t i : order) {
    const Node& n = nodes_[i];
    if (subtree[i] != n.subtree_pins) {
      return absl::InternalError(absl::StrCat("node ", i, " subtree pins ",
                                              n.subtree_pins, ", recomputed ",
                                              subtree[i]));
    }
    if (children[i] != n.num_children) {
      return absl::InternalError(absl::StrCat("node ", i, " counts ",
                                              n.num_children, " children, has ",
                                              children[i]));
    }
    if (n.num_children == 0 && n.checkpoints.empty() && n.pin_count == 0) {
      return absl::InternalError(absl::StrCat(
          "node ", i, " is a leaf with no checkpoint and no pin: unpruned"));
    }
    if (n.parent >= 0) {
      subtree[n.parent] += subtree[i];
      if (subtree[i] == 0) ++num_evictable;
    }
  }
  if (num_evictable != num_evictable_kv_blocks_) {
    return absl::InternalError(absl::StrCat(
        num_evictable, " evictable blocks, count ", num_evictable_kv_blocks_));
  }
  return absl::OkStatus();
}

}  // namespace tributary
