// The prefix index against a brute-force model of the same behaviour, under
// random operation sequences that a scheduler could issue: sequences arrive
// with prompts that share prefixes, attach hits, insert checkpoints at any
// position, leave; live sequences claim KV blocks by eviction. The model
// keeps plain maps from whole token prefixes to blocks and checkpoints and
// recomputes from scratch what the index keeps incrementally (which nodes
// survive, which blocks are evictable). A simulated allocator checks that
// every block reference the index takes is given back: at the end every
// count is at its baseline.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/scheduler/prefix_index.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using Tokens = std::vector<int32_t>;
using Key = std::pair<PrefixNamespace, Tokens>;

bool IsPrefix(const Tokens& a, const Tokens& b) {  // a is a prefix of b
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

Tokens Head(const Tokens& t, int64_t n) {
  return Tokens(t.begin(), t.begin() + n);
}

// What the index should do, by brute force.
class Model {
 public:
  struct Node {
    int32_t block = -1;
    int64_t pins = 0;
  };
  struct Checkpoint {
    CheckpointId id = kNoCheckpoint;
    int32_t slot = -1;
    int32_t tail_block = -1;
    int64_t pins = 0;
    int64_t last_use = 0;
  };

  Model(int64_t block_size, int64_t num_slots)
      : b_(block_size), num_slots_(num_slots) {}

  PrefixMatch Lookup(PrefixNamespace ns, const Tokens& tokens,
                     int64_t max_tokens) const {
    PrefixMatch m;
    int64_t k = 0;
    while ((k + 1) * b_ <= static_cast<int64_t>(tokens.size()) &&
           nodes_.count({ns, Head(tokens, (k + 1) * b_)})) {
      ++k;
    }
    m.num_block_tokens_matched = k * b_;
    const Checkpoint* best = nullptr;
    int64_t best_r = 0;
    for (const auto& [key, c] : ckpts_) {
      const int64_t r = static_cast<int64_t>(key.second.size());
      if (key.first != ns || r > max_tokens || r <= best_r ||
          !IsPrefix(key.second, tokens)) {
        continue;
      }
      best = &c;
      best_r = r;
    }
    if (best == nullptr) return m;
    m.num_tokens = best_r;
    for (int64_t d = 1; d <= best_r / b_; ++d) {
      m.kv_blocks.push_back(nodes_.at({ns, Head(tokens, d * b_)}).block);
    }
    m.tail_kv_block = best->tail_block;
    m.checkpoint = best->id;
    m.checkpoint_slot = best->slot;
    return m;
  }

  bool Contains(PrefixNamespace ns, const Tokens& tokens) const {
    return ckpts_.count({ns, tokens}) > 0;
  }
  bool HasRoom() const {
    if (static_cast<int64_t>(ckpts_.size()) < num_slots_) return true;
    for (const auto& [key, c] : ckpts_) {
      if (c.pins == 0) return true;
    }
    return false;
  }

  // Returns the expected outcome; `slot` and `id` come from the index (the
  // model checks them for being free and new, not for their value).
  struct InsertOutcome {
    bool inserted = false;
    bool duplicate = false;
    std::vector<int32_t> adopted;
    std::vector<int32_t> evicted_blocks;  // sorted
    int64_t evicted_checkpoints = 0;
  };
  InsertOutcome Insert(PrefixNamespace ns, const Tokens& tokens,
                       const std::vector<int32_t>& blocks, int32_t tail) {
    InsertOutcome out;
    auto dup = ckpts_.find({ns, tokens});
    if (dup != ckpts_.end()) {
      out.duplicate = true;
      dup->second.last_use = ++clock_;
      return out;
    }
    if (num_slots_ == 0) return out;
    if (static_cast<int64_t>(ckpts_.size()) == num_slots_) {
      if (!EvictLru(&out.evicted_blocks)) return out;
      out.evicted_checkpoints = 1;
      std::sort(out.evicted_blocks.begin(), out.evicted_blocks.end());
    }
    const int64_t r = static_cast<int64_t>(tokens.size());
    for (int64_t d = 1; d <= r / b_; ++d) {
      const Key key{ns, Head(tokens, d * b_)};
      if (nodes_.count(key)) continue;
      nodes_[key] = Node{blocks[static_cast<size_t>(d - 1)], 1};
      out.adopted.push_back(blocks[static_cast<size_t>(d - 1)]);
    }
    Checkpoint c;
    c.tail_block = tail;
    c.last_use = ++clock_;
    if (tail >= 0) out.adopted.push_back(tail);
    ckpts_[{ns, tokens}] = c;
    out.inserted = true;
    return out;
  }
  void RecordInserted(PrefixNamespace ns, const Tokens& tokens, CheckpointId id,
                      int32_t slot) {
    Checkpoint& c = ckpts_.at({ns, tokens});
    c.id = id;
    c.slot = slot;
  }

  void Acquire(PrefixNamespace ns, const Tokens& tokens, int64_t r) {
    Checkpoint& c = ckpts_.at({ns, Head(tokens, r)});
    ++c.pins;
    c.last_use = ++clock_;
    for (int64_t d = 1; d <= r / b_; ++d) {
      ++nodes_.at({ns, Head(tokens, d * b_)}).pins;
    }
  }
  void Release(CheckpointId id) {
    for (auto& [key, c] : ckpts_) {
      if (c.id == id) --c.pins;
    }
  }
  // The blocks given up, sorted.
  std::vector<int32_t> Unpin(const std::vector<int32_t>& table) {
    for (int32_t block : table) {
      for (auto& [key, n] : nodes_) {
        if (n.block == block) --n.pins;
      }
    }
    std::vector<int32_t> released = Prune(/*pinned_checkpoints_only=*/false);
    std::sort(released.begin(), released.end());
    return released;
  }
  bool EvictLru(std::vector<int32_t>* released) {
    auto victim = ckpts_.end();
    for (auto it = ckpts_.begin(); it != ckpts_.end(); ++it) {
      if (it->second.pins == 0 &&
          (victim == ckpts_.end() ||
           it->second.last_use < victim->second.last_use)) {
        victim = it;
      }
    }
    if (victim == ckpts_.end()) return false;
    if (victim->second.tail_block >= 0) {
      released->push_back(victim->second.tail_block);
    }
    ckpts_.erase(victim);
    const std::vector<int32_t> pruned = Prune(false);
    released->insert(released->end(), pruned.begin(), pruned.end());
    return true;
  }

  // A node survives when a checkpoint at or below it (its prefix extends
  // the node's) or a pinned node at or below it exists: removes the others
  // (or, with pinned_checkpoints_only, only counts the blocks a removal of
  // every unpinned checkpoint would give up).
  std::vector<int32_t> Prune(bool pinned_checkpoints_only) {
    std::vector<int32_t> released;
    std::vector<Key> dead;
    for (const auto& [key, n] : nodes_) {
      bool keep = false;
      for (const auto& [ck, c] : ckpts_) {
        if (pinned_checkpoints_only && c.pins == 0) continue;
        if (ck.first == key.first && IsPrefix(key.second, ck.second)) {
          keep = true;
          break;
        }
      }
      for (auto it = nodes_.begin(); !keep && it != nodes_.end(); ++it) {
        keep = it->second.pins > 0 && it->first.first == key.first &&
               IsPrefix(key.second, it->first.second);
      }
      if (!keep) {
        dead.push_back(key);
        released.push_back(n.block);
      }
    }
    if (!pinned_checkpoints_only) {
      for (const Key& key : dead) nodes_.erase(key);
    }
    return released;
  }
  int64_t NumEvictable() {
    int64_t n = static_cast<int64_t>(Prune(true).size());
    for (const auto& [key, c] : ckpts_) {
      if (c.pins == 0 && c.tail_block >= 0) ++n;
    }
    return n;
  }

  std::vector<int32_t> HeldBlocks() const {
    std::vector<int32_t> blocks;
    for (const auto& [key, n] : nodes_) blocks.push_back(n.block);
    for (const auto& [key, c] : ckpts_) {
      if (c.tail_block >= 0) blocks.push_back(c.tail_block);
    }
    std::sort(blocks.begin(), blocks.end());
    return blocks;
  }
  int64_t NodePins(int32_t block) const {
    for (const auto& [key, n] : nodes_) {
      if (n.block == block) return n.pins;
    }
    return 0;
  }
  int64_t num_checkpoints() const {
    return static_cast<int64_t>(ckpts_.size());
  }
  int64_t num_nodes() const { return static_cast<int64_t>(nodes_.size()); }
  int64_t num_pinned_checkpoints() const {
    int64_t n = 0;
    for (const auto& [key, c] : ckpts_) n += c.pins > 0 ? 1 : 0;
    return n;
  }
  bool SlotInUse(int32_t slot) const {
    for (const auto& [key, c] : ckpts_) {
      if (c.slot == slot) return true;
    }
    return false;
  }

 private:
  int64_t b_;
  int64_t num_slots_;
  int64_t clock_ = 0;
  std::map<Key, Node> nodes_;        // key: a prefix of whole blocks
  std::map<Key, Checkpoint> ckpts_;  // key: the checkpoint's prefix
};

// How often the interesting cases came up, so that a change to the
// generator cannot quietly stop exercising them.
struct Coverage {
  int64_t hits = 0;       // attached a cached prefix
  int64_t tail_hits = 0;  // … ending inside a block
  int64_t inserted = 0;
  int64_t duplicates = 0;
  int64_t full = 0;  // refused: every checkpoint pinned
  int64_t insert_evictions = 0;
  int64_t released_on_leave = 0;  // blocks pruned by a sequence leaving
  int64_t evicted_blocks = 0;
  int64_t branch_points = 0;  // blocks matched deeper than the hit
};

// One live sequence of the simulated scheduler.
struct LiveSequence {
  PrefixNamespace ns = kPlainNamespace;
  Tokens tokens;
  std::vector<int32_t> table;  // covers every token
  std::vector<CheckpointId> pinned_checkpoints;
};

class Simulation {
 public:
  Simulation(uint64_t seed, int64_t block_size, int64_t num_slots,
             Coverage* coverage)
      : rng_(seed),
        b_(block_size),
        model_(block_size, num_slots),
        coverage_(coverage) {
    PrefixIndexConfig config;
    config.kv_block_size = block_size;
    config.kv_block_bytes = 7;
    config.checkpoint_bytes = 1000;
    config.max_checkpoint_bytes = num_slots * 1000 + 999;  // rounds down
    auto index = PrefixIndex::Create(config);
    EXPECT_TRUE(index.ok()) << index.status();
    index_ = *std::move(index);
    // A few base prompts over a tiny vocabulary: prompts share prefixes of
    // every length, and different ones collide in their later blocks.
    for (int i = 0; i < 4; ++i) bases_.push_back(RandomTokens(Uniform(0, 40)));
  }

  void Run(int num_ops) {
    for (int op = 0; op < num_ops && !::testing::Test::HasFailure(); ++op) {
      trace_ = absl::StrCat("op ", op);
      const int64_t kind = Uniform(0, 99);
      if (kind < 25) {
        Start();
      } else if (kind < 55) {
        InsertFromLive();
      } else if (kind < 65) {
        ReleaseACheckpoint();
      } else if (kind < 82) {
        Leave(Uniform(0, 1000));
      } else if (kind < 92) {
        Evict();
      } else {
        LookupOnly();
      }
      Compare();
    }
    // Everything leaves, then the cache is emptied: back to the baseline.
    trace_ = "the end";
    while (!live_.empty()) {
      Leave(0);
      Compare();
    }
    const PrefixEvictions all = index_->EvictAll();
    std::vector<int32_t> want;
    int64_t want_checkpoints = 0;
    while (model_.EvictLru(&want)) ++want_checkpoints;
    EXPECT_EQ(Sorted(all.kv_blocks), Sorted(want));
    EXPECT_EQ(all.num_checkpoints, want_checkpoints);
    GiveBack(all.kv_blocks);
    Compare();
    EXPECT_EQ(index_->num_checkpoints(), 0);
    EXPECT_EQ(index_->num_kv_blocks(), 0);
    EXPECT_EQ(index_->num_nodes(), 0);
    EXPECT_EQ(index_->cached_bytes(), 0);
    EXPECT_EQ(index_->num_pinned_checkpoints(), 0);
    for (const auto& [block, refs] : refs_) {
      EXPECT_EQ(refs, 0) << "block " << block << " leaked";
    }
  }

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  Tokens RandomTokens(int64_t n) {
    Tokens t;
    for (int64_t i = 0; i < n; ++i)
      t.push_back(static_cast<int32_t>(Uniform(0, 2)));
    return t;
  }
  int32_t FreshBlock() {
    const int32_t b = next_block_++;
    refs_[b] = 1;  // the caller's reference
    return b;
  }
  void Take(const std::vector<int32_t>& blocks) {
    for (int32_t b : blocks) {
      ASSERT_GT(refs_[b], 0) << trace_ << ": adopted a free block " << b;
      ++refs_[b];
    }
  }
  void GiveBack(const std::vector<int32_t>& blocks) {
    for (int32_t b : blocks) {
      ASSERT_GT(refs_[b], 0) << trace_ << ": double free of block " << b;
      --refs_[b];
    }
  }
  std::vector<int32_t> Sorted(std::vector<int32_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  }

  void ExpectSameMatch(const PrefixMatch& got, const PrefixMatch& want) {
    EXPECT_EQ(got.num_tokens, want.num_tokens) << trace_;
    EXPECT_EQ(got.kv_blocks, want.kv_blocks) << trace_;
    EXPECT_EQ(got.tail_kv_block, want.tail_kv_block) << trace_;
    EXPECT_EQ(got.checkpoint, want.checkpoint) << trace_;
    EXPECT_EQ(got.checkpoint_slot, want.checkpoint_slot) << trace_;
    EXPECT_EQ(got.num_block_tokens_matched, want.num_block_tokens_matched)
        << trace_;
  }

  Tokens RandomPrompt() {
    const Tokens& base = bases_[static_cast<size_t>(Uniform(0, 3))];
    Tokens t = Head(base, Uniform(0, static_cast<int64_t>(base.size())));
    const Tokens more = RandomTokens(Uniform(t.empty() ? 1 : 0, 12));
    t.insert(t.end(), more.begin(), more.end());
    return t;
  }

  void Start() {
    if (live_.size() >= 6) return;
    LiveSequence s;
    s.ns = Uniform(0, 4) == 0 ? 1 : kPlainNamespace;
    s.tokens = RandomPrompt();
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    const PrefixMatch got = index_->Lookup(s.ns, s.tokens, n - 1);
    ExpectSameMatch(got, model_.Lookup(s.ns, s.tokens, n - 1));
    if (got.num_block_tokens_matched > got.num_tokens / b_ * b_) {
      ++coverage_->branch_points;
    }
    if (got.num_tokens > 0 && Uniform(0, 4) > 0) {
      ++coverage_->hits;
      if (got.tail_kv_block >= 0) ++coverage_->tail_hits;
      ASSERT_TRUE(index_->Acquire(got).ok()) << trace_;
      model_.Acquire(s.ns, s.tokens, got.num_tokens);
      s.pinned_checkpoints.push_back(got.checkpoint);
      s.table = got.kv_blocks;
      Take(s.table);  // the sequence's references to the shared blocks
    }
    while (static_cast<int64_t>(s.table.size()) * b_ < n) {
      s.table.push_back(FreshBlock());
    }
    live_.push_back(std::move(s));
  }

  void InsertFromLive() {
    if (live_.empty()) return;
    LiveSequence& s = live_[static_cast<size_t>(
        Uniform(0, static_cast<int64_t>(live_.size()) - 1))];
    const int64_t r = Uniform(1, static_cast<int64_t>(s.tokens.size()));
    const Tokens prefix = Head(s.tokens, r);
    EXPECT_EQ(index_->ContainsCheckpoint(s.ns, prefix),
              model_.Contains(s.ns, prefix))
        << trace_;
    EXPECT_EQ(index_->HasRoomForCheckpoint(), model_.HasRoom()) << trace_;
    int32_t tail = -1;
    if (r % b_ != 0) tail = FreshBlock();  // a copy made for the index
    PrefixInsert insert;
    insert.ns = s.ns;
    insert.tokens = prefix;
    insert.kv_blocks = s.table;
    insert.tail_kv_block = tail;
    auto got = index_->Insert(insert);
    ASSERT_TRUE(got.ok()) << trace_ << ": " << got.status();
    const Model::InsertOutcome want =
        model_.Insert(s.ns, prefix, s.table, tail);
    EXPECT_EQ(got->inserted, want.inserted) << trace_;
    EXPECT_EQ(got->duplicate, want.duplicate) << trace_;
    EXPECT_EQ(got->adopted_kv_blocks, want.adopted) << trace_;
    EXPECT_EQ(Sorted(got->evicted.kv_blocks), want.evicted_blocks) << trace_;
    EXPECT_EQ(got->evicted.num_checkpoints, want.evicted_checkpoints) << trace_;
    GiveBack(got->evicted.kv_blocks);
    coverage_->duplicates += got->duplicate ? 1 : 0;
    coverage_->insert_evictions += got->evicted.num_checkpoints;
    if (!got->inserted && !got->duplicate) ++coverage_->full;
    if (got->inserted) {
      ++coverage_->inserted;
      ASSERT_GE(got->checkpoint_slot, 0) << trace_;
      EXPECT_FALSE(model_.SlotInUse(got->checkpoint_slot)) << trace_;
      EXPECT_GE(got->checkpoint, next_checkpoint_) << trace_;  // new
      next_checkpoint_ = got->checkpoint + 1;
      model_.RecordInserted(s.ns, prefix, got->checkpoint,
                            got->checkpoint_slot);
      Take(got->adopted_kv_blocks);
    }
    if (tail >= 0) GiveBack({tail});  // the caller's copy reference
  }

  void ReleaseACheckpoint() {
    for (LiveSequence& s : live_) {
      if (s.pinned_checkpoints.empty()) continue;
      const CheckpointId id = s.pinned_checkpoints.back();
      s.pinned_checkpoints.pop_back();
      ASSERT_TRUE(index_->ReleaseCheckpoint(id).ok()) << trace_;
      model_.Release(id);
      return;
    }
  }

  void Leave(int64_t which) {
    if (live_.empty()) return;
    const size_t i = static_cast<size_t>(which) % live_.size();
    LiveSequence s = std::move(live_[i]);
    live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
    // Its copies ran at the step's end: the checkpoint pins go first.
    for (CheckpointId id : s.pinned_checkpoints) {
      ASSERT_TRUE(index_->ReleaseCheckpoint(id).ok()) << trace_;
      model_.Release(id);
    }
    PrefixEvictions released;
    ASSERT_TRUE(index_->UnpinKvBlocks(s.table, &released).ok()) << trace_;
    EXPECT_EQ(Sorted(released.kv_blocks), model_.Unpin(s.table)) << trace_;
    EXPECT_EQ(released.num_checkpoints, 0) << trace_;
    coverage_->released_on_leave +=
        static_cast<int64_t>(released.kv_blocks.size());
    GiveBack(released.kv_blocks);
    GiveBack(s.table);  // the sequence's own references
  }

  void Evict() {
    std::vector<int32_t> want;
    int64_t want_checkpoints = 0;
    PrefixEvictions got;
    if (Uniform(0, 1) == 0) {
      const bool evicted = index_->EvictLeastRecentlyUsed(&got);
      EXPECT_EQ(evicted, model_.EvictLru(&want)) << trace_;
      want_checkpoints = evicted ? 1 : 0;
    } else {
      const int64_t n = Uniform(0, 6);
      got = index_->EvictForKvBlocks(n);
      while (static_cast<int64_t>(want.size()) < n &&
             model_.NumEvictable() > 0 && model_.EvictLru(&want)) {
        ++want_checkpoints;
      }
    }
    EXPECT_EQ(Sorted(got.kv_blocks), Sorted(want)) << trace_;
    EXPECT_EQ(got.num_checkpoints, want_checkpoints) << trace_;
    coverage_->evicted_blocks += static_cast<int64_t>(got.kv_blocks.size());
    GiveBack(got.kv_blocks);
  }

  void LookupOnly() {
    const PrefixNamespace ns = Uniform(0, 4) == 0 ? 1 : kPlainNamespace;
    const Tokens t = RandomPrompt();
    const int64_t max = Uniform(0, static_cast<int64_t>(t.size()) + 2);
    ExpectSameMatch(index_->Lookup(ns, t, max), model_.Lookup(ns, t, max));
  }

  void Compare() {
    const absl::Status s = index_->CheckInvariants();
    ASSERT_TRUE(s.ok()) << trace_ << ": " << s;
    EXPECT_EQ(index_->num_checkpoints(), model_.num_checkpoints()) << trace_;
    EXPECT_EQ(index_->num_nodes(), model_.num_nodes()) << trace_;
    EXPECT_EQ(index_->HeldKvBlocks(), model_.HeldBlocks()) << trace_;
    EXPECT_EQ(index_->num_kv_blocks(),
              static_cast<int64_t>(model_.HeldBlocks().size()))
        << trace_;
    EXPECT_EQ(index_->num_evictable_kv_blocks(), model_.NumEvictable())
        << trace_;
    EXPECT_EQ(index_->num_pinned_checkpoints(), model_.num_pinned_checkpoints())
        << trace_;
    EXPECT_EQ(index_->cached_bytes(),
              index_->num_kv_blocks() * 7 + index_->num_checkpoints() * 1000)
        << trace_;
    // The allocator's view: a held block has one reference from the index
    // and one from each live sequence whose table holds it, and a node's
    // pins are exactly those sequences.
    std::map<int32_t, int64_t> holders;
    for (const LiveSequence& l : live_) {
      for (int32_t b : l.table) ++holders[b];
    }
    for (int32_t b : index_->HeldKvBlocks()) {
      EXPECT_EQ(refs_[b], holders[b] + 1) << trace_ << " block " << b;
      EXPECT_EQ(index_->KvBlockPinCount(b), model_.NodePins(b)) << trace_;
      EXPECT_EQ(index_->KvBlockPinCount(b), holders[b])
          << trace_ << " block " << b;
    }
  }

  std::mt19937_64 rng_;
  int64_t b_;
  Model model_;
  Coverage* coverage_;
  std::unique_ptr<PrefixIndex> index_;
  std::vector<Tokens> bases_;
  std::vector<LiveSequence> live_;
  std::map<int32_t, int64_t> refs_;  // the simulated allocator
  int32_t next_block_ = 0;
  CheckpointId next_checkpoint_ = 0;
  std::string trace_;
};

class PrefixIndexModelTest
    : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(PrefixIndexModelTest, RandomOperationsMatchTheModel) {
  const auto [block_size, num_slots] = GetParam();
  Coverage c;
  for (uint64_t seed = 1; seed <= 60 && !HasFailure(); ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed, " block_size ", block_size,
                              " slots ", num_slots));
    Simulation sim(seed, block_size, num_slots, &c);
    sim.Run(300);
  }
  RecordProperty("hits", static_cast<int>(c.hits));
  if (num_slots == 0) {
    EXPECT_EQ(c.inserted + c.hits, 0);
    return;
  }
  EXPECT_GT(c.hits, 50);
  EXPECT_GT(c.inserted, 200);
  EXPECT_GT(c.duplicates, 10);
  EXPECT_GT(c.insert_evictions, 10);
  EXPECT_GT(c.released_on_leave, 10);
  EXPECT_GT(c.evicted_blocks, 10);
  EXPECT_GT(c.branch_points, 10);
  if (block_size > 1) {
    EXPECT_GT(c.tail_hits, 10);
  }
  if (num_slots <= 2) {
    EXPECT_GT(c.full, 0);
  }
  std::printf(
      "coverage: %lld hits (%lld in a block), %lld inserted, %lld duplicates, "
      "%lld refused full, %lld insert evictions, %lld blocks pruned on leave, "
      "%lld evicted, %lld branch points\n",
      static_cast<long long>(c.hits), static_cast<long long>(c.tail_hits),
      static_cast<long long>(c.inserted), static_cast<long long>(c.duplicates),
      static_cast<long long>(c.full),
      static_cast<long long>(c.insert_evictions),
      static_cast<long long>(c.released_on_leave),
      static_cast<long long>(c.evicted_blocks),
      static_cast<long long>(c.branch_points));
}

INSTANTIATE_TEST_SUITE_P(
    BlockSizesAndBudgets, PrefixIndexModelTest,
    ::testing::Values(std::make_pair(int64_t{1}, int64_t{3}),
                      std::make_pair(int64_t{3}, int64_t{1}),
                      std::make_pair(int64_t{4}, int64_t{2}),
                      std::make_pair(int64_t{4}, int64_t{6}),
                      std::make_pair(int64_t{16}, int64_t{4}),
                      std::make_pair(int64_t{4}, int64_t{0})),
    [](const auto& info) {
      return absl::StrCat("block", info.param.first, "_slots",
                          info.param.second);
    });

}  // namespace
}  // namespace tributary
