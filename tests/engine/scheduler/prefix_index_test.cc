// The prefix index's contract, case by case (kv_block_size 4 throughout, so
// that prefixes stay short enough to read).
#include "engine/scheduler/prefix_index.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr int64_t kBlock = 4;

std::unique_ptr<PrefixIndex> MakeIndex(int64_t num_slots,
                                       int64_t kv_block_bytes = 100,
                                       int64_t checkpoint_bytes = 1000) {
  PrefixIndexConfig config;
  config.kv_block_size = kBlock;
  config.kv_block_bytes = kv_block_bytes;
  config.checkpoint_bytes = checkpoint_bytes;
  config.max_checkpoint_bytes = num_slots * checkpoint_bytes;
  auto index = PrefixIndex::Create(config);
  EXPECT_TRUE(index.ok()) << index.status();
  return *std::move(index);
}

// Tokens 1, 2, …, n (shared prefixes by construction), or a variant whose
// token at `differ_at` is 99.
std::vector<int32_t> Tokens(int64_t n, int64_t differ_at = -1) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) {
    t.push_back(i == differ_at ? 99 : static_cast<int32_t>(i + 1));
  }
  return t;
}

PrefixInsertResult InsertOk(PrefixIndex& index,
                            const std::vector<int32_t>& tokens,
                            const std::vector<int32_t>& blocks,
                            int32_t tail = -1,
                            PrefixNamespace ns = kPlainNamespace) {
  PrefixInsert insert;
  insert.ns = ns;
  insert.tokens = tokens;
  insert.kv_blocks = blocks;
  insert.tail_kv_block = tail;
  auto result = index.Insert(insert);
  EXPECT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
  return result.ok() ? *std::move(result) : PrefixInsertResult{};
}

void ExpectOk(const PrefixIndex& index) {
  const absl::Status s = index.CheckInvariants();
  EXPECT_TRUE(s.ok()) << s;
}

TEST(PrefixIndexConfigTest, ValidateNamesTheField) {
  PrefixIndexConfig c;
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.num_checkpoint_slots(), 0);
  c.kv_block_size = 0;
  EXPECT_THAT(c.Validate().message(), HasSubstr("kv_block_size"));
  c = PrefixIndexConfig{};
  c.kv_block_bytes = -1;
  EXPECT_THAT(c.Validate().message(), HasSubstr("kv_block_bytes"));
  c = PrefixIndexConfig{};
  c.checkpoint_bytes = 0;
  EXPECT_THAT(c.Validate().message(), HasSubstr("checkpoint_bytes"));
  c = PrefixIndexConfig{};
  c.max_checkpoint_bytes = -1;
  EXPECT_THAT(c.Validate().message(), HasSubstr("max_checkpoint_bytes"));
  c = PrefixIndexConfig{};
  c.max_checkpoint_bytes = int64_t{1} << 40;  // 2^40 slots of 1 byte
  EXPECT_THAT(c.Validate().message(), HasSubstr("at most"));
  c = PrefixIndexConfig{};
  c.checkpoint_bytes = 300;
  c.max_checkpoint_bytes = 1000;
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.num_checkpoint_slots(), 3);  // the budget rounds down
  c = PrefixIndexConfig{};
  c.kv_block_size = -1;
  EXPECT_EQ(PrefixIndex::Create(c).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PrefixIndexTest, EmptyIndexMisses) {
  auto index = MakeIndex(2);
  const PrefixMatch m = index->Lookup(kPlainNamespace, Tokens(9), 8);
  EXPECT_EQ(m.num_tokens, 0);
  EXPECT_THAT(m.kv_blocks, IsEmpty());
  EXPECT_EQ(m.checkpoint, kNoCheckpoint);
  EXPECT_EQ(m.tail_kv_block, -1);
  EXPECT_EQ(m.num_block_tokens_matched, 0);
  EXPECT_EQ(index->num_checkpoints(), 0);
  EXPECT_EQ(index->cached_bytes(), 0);
  EXPECT_EQ(index->checkpoint_capacity_bytes(), 2000);
  ExpectOk(*index);
}

TEST(PrefixIndexTest, InsertThenLookupFindsTheCheckpointWithItsBlocks) {
  auto index = MakeIndex(2);
  // After 6 tokens: one full block (10) and a tail of 2 tokens (block 20);
  // the caller's second block (11) is not the prefix's.
  const PrefixInsertResult r =
      InsertOk(*index, Tokens(6), {10, 11}, /*tail=*/20);
  EXPECT_TRUE(r.inserted);
  EXPECT_FALSE(r.duplicate);
  EXPECT_EQ(r.checkpoint_slot, 0);
  EXPECT_THAT(r.adopted_kv_blocks, ElementsAre(10, 20));
  EXPECT_THAT(r.evicted.kv_blocks, IsEmpty());
  EXPECT_EQ(index->num_checkpoints(), 1);
  EXPECT_EQ(index->num_nodes(), 1);
  EXPECT_EQ(index->num_kv_blocks(), 2);
  EXPECT_EQ(index->cached_bytes(), 2 * 100 + 1000);
  EXPECT_THAT(index->HeldKvBlocks(), ElementsAre(10, 20));
  // The inserting sequence holds block 10: pinned; the tail is the index's.
  EXPECT_EQ(index->KvBlockPinCount(10), 1);
  EXPECT_EQ(index->KvBlockPinCount(20), 0);
  EXPECT_EQ(index->num_evictable_kv_blocks(), 1);  // the tail only

  const PrefixMatch m = index->Lookup(kPlainNamespace, Tokens(10), 9);
  EXPECT_EQ(m.num_tokens, 6);
  EXPECT_THAT(m.kv_blocks, ElementsAre(10));
  EXPECT_EQ(m.tail_kv_block, 20);
  EXPECT_EQ(m.checkpoint, r.checkpoint);
  EXPECT_EQ(m.checkpoint_slot, 0);
  EXPECT_EQ(m.num_block_tokens_matched, 4);
  EXPECT_TRUE(index->ContainsCheckpoint(kPlainNamespace, Tokens(6)));
  EXPECT_FALSE(index->ContainsCheckpoint(kPlainNamespace, Tokens(5)));
  EXPECT_FALSE(index->ContainsCheckpoint(kPlainNamespace, Tokens(4)));
  // A different tail token is a miss, a different first block too.
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(10, 5), 9).num_tokens, 0);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(10, 0), 9).num_tokens, 0);
}

TEST(PrefixIndexTest, LookupKeepsAtLeastOneTokenToCompute) {
  auto index = MakeIndex(4);
  InsertOk(*index, Tokens(8), {1, 2});
  InsertOk(*index, Tokens(4), {1});
  // The same 8 tokens again: the last one must be computed for its logits,
  // so the checkpoint after 8 is out of reach and the one after 4 serves.
  PrefixMatch m = index->Lookup(kPlainNamespace, Tokens(8), 7);
  EXPECT_EQ(m.num_tokens, 4);
  EXPECT_THAT(m.kv_blocks, ElementsAre(1));
  EXPECT_EQ(m.num_block_tokens_matched, 8);  // a branch point lies deeper
  m = index->Lookup(kPlainNamespace, Tokens(9), 8);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_THAT(m.kv_blocks, ElementsAre(1, 2));
  EXPECT_EQ(m.tail_kv_block, -1);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(9), 3).num_tokens, 0);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(9), 0).num_tokens, 0);
  // A query shorter than the checkpoint cannot use it.
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(6), 100).num_tokens, 4);
}

TEST(PrefixIndexTest, LookupTakesTheDeepestThenTheLongestMatchingTail) {
  auto index = MakeIndex(8);
  InsertOk(*index, Tokens(5), {1}, 50);
  InsertOk(*index, Tokens(7), {1}, 70);
  InsertOk(*index, Tokens(6, 5), {1}, 60);  // another tail: 1 2 3 4 5 99
  InsertOk(*index, Tokens(2), {}, 20);      // on the root
  EXPECT_EQ(index->num_nodes(), 1);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(12), 11).num_tokens, 7);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(12), 11).tail_kv_block, 70);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(12), 6).num_tokens, 5);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(12, 5), 11).num_tokens, 6);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(12, 4), 11).num_tokens, 2);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(12, 4), 11).tail_kv_block,
            20);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(12, 1), 11).num_tokens, 0);
}

TEST(PrefixIndexTest, NamespacesNeverShareEntries) {
  auto index = MakeIndex(4);
  InsertOk(*index, Tokens(8), {1, 2}, -1, /*ns=*/7);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(9), 8).num_tokens, 0);
  EXPECT_EQ(index->Lookup(7, Tokens(9), 8).num_tokens, 8);
  EXPECT_FALSE(index->ContainsCheckpoint(kPlainNamespace, Tokens(8)));
  // The same tokens in the plain namespace are a new entry with its own
  // blocks, not a duplicate.
  const PrefixInsertResult r = InsertOk(*index, Tokens(8), {3, 4});
  EXPECT_TRUE(r.inserted);
  EXPECT_THAT(r.adopted_kv_blocks, ElementsAre(3, 4));
  EXPECT_THAT(index->Lookup(kPlainNamespace, Tokens(9), 8).kv_blocks,
              ElementsAre(3, 4));
  EXPECT_THAT(index->Lookup(7, Tokens(9), 8).kv_blocks, ElementsAre(1, 2));
}

TEST(PrefixIndexTest, DuplicateInsertTakesNothingAndCountsAsAUse) {
  auto index = MakeIndex(2);
  const PrefixInsertResult a = InsertOk(*index, Tokens(4), {1});
  InsertOk(*index, Tokens(8, 4), {1, 2});  // shares block 1: 1 2 3 4 99 …
  // Another sequence computed the first 4 tokens itself (block 5).
  const PrefixInsertResult dup = InsertOk(*index, Tokens(4), {5});
  EXPECT_FALSE(dup.inserted);
  EXPECT_TRUE(dup.duplicate);
  EXPECT_EQ(dup.checkpoint, a.checkpoint);
  EXPECT_THAT(dup.adopted_kv_blocks, IsEmpty());
  EXPECT_EQ(dup.checkpoint_slot, -1);
  EXPECT_FALSE(index->HoldsKvBlock(5));
  // The duplicate made the first checkpoint the most recent: a third one
  // evicts the second (whose block 2 goes; block 1 is pinned).
  const PrefixInsertResult c = InsertOk(*index, Tokens(3), {}, 9);
  EXPECT_TRUE(c.inserted);
  EXPECT_EQ(c.evicted.num_checkpoints, 1);
  EXPECT_THAT(c.evicted.kv_blocks, IsEmpty());  // block 2 is pinned
  EXPECT_TRUE(index->ContainsCheckpoint(kPlainNamespace, Tokens(4)));
  EXPECT_FALSE(index->ContainsCheckpoint(kPlainNamespace, Tokens(8, 4)));
  EXPECT_EQ(index->num_evicted_checkpoints_total(), 1);
}

TEST(PrefixIndexTest, InsertRejectsMisuseAndChangesNothing) {
  auto index = MakeIndex(4);
  InsertOk(*index, Tokens(6), {1, 2}, 3);
  const int64_t bytes = index->cached_bytes();
  auto expect_invalid = [&](const PrefixInsert& insert, const char* what) {
    auto r = index->Insert(insert);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(r.status().message(), HasSubstr(what));
    EXPECT_EQ(index->cached_bytes(), bytes);
    ExpectOk(*index);
  };
  const std::vector<int32_t> t8 = Tokens(8), t9 = Tokens(9);
  const std::vector<int32_t> none, one{7}, two{7, 8}, neg{-1, 8}, moved{2, 1};
  const std::vector<int32_t> t8b = Tokens(8, 0);  // 99 2 3 4 …
  const std::vector<int32_t> reuse{1, 8};
  expect_invalid({kPlainNamespace, none, none, -1}, "at least one token");
  expect_invalid({kPlainNamespace, t8, one, -1}, "needs the 2");
  expect_invalid({kPlainNamespace, t9, two, -1}, "tail_kv_block = -1");
  expect_invalid({kPlainNamespace, t8, two, 9}, "tail_kv_block = 9");
  expect_invalid({kPlainNamespace, t8, neg, -1}, "kv_blocks[0] = -1");
  // Block 1 is the node of tokens 1 2 3 4; it cannot also hold 99 2 3 4.
  expect_invalid({kPlainNamespace, t8b, reuse, -1}, "another position");
  // Nor may it move to depth 2.
  expect_invalid({kPlainNamespace, t8b, moved, -1}, "another position");
  expect_invalid({kPlainNamespace, t8, {3, 8}, -1}, "tail block");
  expect_invalid({kPlainNamespace, t9, two, 3}, "held by the index");
  expect_invalid({kPlainNamespace, t9, two, 1}, "held by the index");
  expect_invalid({kPlainNamespace, t9, two, 8}, "also kv_blocks[1]");
  // The caller's own table at the same position is fine (it is pinned).
  const std::vector<int32_t> own{1, 8};
  const PrefixInsertResult r = InsertOk(*index, t8, own);
  EXPECT_TRUE(r.inserted);
  EXPECT_THAT(r.adopted_kv_blocks, ElementsAre(8));
}

TEST(PrefixIndexTest, BlocksOfAnotherSequenceAreKeptAndOnlyNewOnesAdopted) {
  auto index = MakeIndex(4);
  InsertOk(*index, Tokens(8), {1, 2});
  // A second sequence computed the same 8 tokens and 4 more in blocks
  // 5, 6, 7: the tree keeps 1 and 2 and adopts only 7.
  const PrefixInsertResult r = InsertOk(*index, Tokens(12), {5, 6, 7});
  EXPECT_THAT(r.adopted_kv_blocks, ElementsAre(7));
  EXPECT_THAT(index->Lookup(kPlainNamespace, Tokens(13), 12).kv_blocks,
              ElementsAre(1, 2, 7));
  EXPECT_EQ(index->KvBlockPinCount(1), 1);  // the first sequence only
  EXPECT_EQ(index->KvBlockPinCount(7), 1);  // the second
  EXPECT_FALSE(index->HoldsKvBlock(5));
  PrefixEvictions released;
  // The second sequence leaves: its table holds 5 6 7, of which 7 is a node.
  ASSERT_TRUE(index->UnpinKvBlocks({5, 6, 7}, &released).ok());
  EXPECT_THAT(released.kv_blocks, IsEmpty());  // 7 carries a checkpoint
  EXPECT_EQ(index->KvBlockPinCount(7), 0);
  ExpectOk(*index);
}

TEST(PrefixIndexTest, AcquirePinsThePathAndTheCheckpointUntilReleased) {
  auto index = MakeIndex(1);
  InsertOk(*index, Tokens(9), {1, 2}, 3);
  PrefixEvictions released;
  ASSERT_TRUE(index->UnpinKvBlocks({1, 2, 3}, &released).ok());
  EXPECT_THAT(released.kv_blocks, IsEmpty());
  EXPECT_EQ(index->num_evictable_kv_blocks(), 3);

  const PrefixMatch m = index->Lookup(kPlainNamespace, Tokens(12), 11);
  ASSERT_EQ(m.num_tokens, 9);
  ASSERT_TRUE(index->Acquire(m).ok());
  ExpectOk(*index);
  EXPECT_EQ(index->num_pinned_checkpoints(), 1);
  EXPECT_EQ(index->KvBlockPinCount(1), 1);
  EXPECT_EQ(index->KvBlockPinCount(2), 1);
  EXPECT_EQ(index->num_evictable_kv_blocks(), 0);
  // Pinned: neither an eviction nor an insert into the full index removes it.
  EXPECT_FALSE(index->HasRoomForCheckpoint());
  EXPECT_FALSE(index->EvictLeastRecentlyUsed(&released));
  const PrefixInsertResult full = InsertOk(*index, Tokens(3, 0), {}, 4);
  EXPECT_FALSE(full.inserted);
  EXPECT_FALSE(full.duplicate);
  EXPECT_THAT(full.adopted_kv_blocks, IsEmpty());
  EXPECT_EQ(index->EvictForKvBlocks(10).num_checkpoints, 0);

  // The state was copied: the checkpoint may go, the blocks stay with the
  // sequence.
  ASSERT_TRUE(index->ReleaseCheckpoint(m.checkpoint).ok());
  EXPECT_EQ(index->ReleaseCheckpoint(m.checkpoint).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(index->num_evictable_kv_blocks(), 1);  // the tail
  PrefixEvictions evicted = index->EvictForKvBlocks(3);
  EXPECT_EQ(evicted.num_checkpoints, 1);
  EXPECT_THAT(evicted.kv_blocks, ElementsAre(3));  // the pinned path stays
  EXPECT_EQ(index->num_checkpoints(), 0);
  EXPECT_EQ(index->num_nodes(), 2);
  ExpectOk(*index);
  // A stale match is refused.
  EXPECT_EQ(index->Acquire(m).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(index->ReleaseCheckpoint(m.checkpoint).code(),
            absl::StatusCode::kNotFound);
  // The sequence leaves: its path goes.
  released = {};
  ASSERT_TRUE(index->UnpinKvBlocks({1, 2, 40}, &released).ok());
  EXPECT_THAT(released.kv_blocks, UnorderedElementsAre(1, 2));
  EXPECT_EQ(index->num_kv_blocks(), 0);
  EXPECT_EQ(index->cached_bytes(), 0);
  ExpectOk(*index);
  // A miss acquires nothing.
  EXPECT_TRUE(index->Acquire(PrefixMatch{}).ok());
}

TEST(PrefixIndexTest, AcquireRefusesAMatchTheIndexNoLongerDescribes) {
  auto index = MakeIndex(2);
  InsertOk(*index, Tokens(8), {1, 2});
  PrefixMatch m = index->Lookup(kPlainNamespace, Tokens(9), 8);
  PrefixMatch wrong = m;
  wrong.kv_blocks = {1, 5};
  EXPECT_EQ(index->Acquire(wrong).code(),
            absl::StatusCode::kFailedPrecondition);
  wrong = m;
  wrong.num_tokens = 7;
  EXPECT_EQ(index->Acquire(wrong).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(index->num_pinned_checkpoints(), 0);
  EXPECT_EQ(index->KvBlockPinCount(1), 1);
  ExpectOk(*index);
}

TEST(PrefixIndexTest, LeastRecentlyUsedGoesFirstAndTakesOnlyItsOwnBlocks) {
  auto index = MakeIndex(2);
  const PrefixInsertResult a = InsertOk(*index, Tokens(8), {1, 2});
  PrefixEvictions released;
  ASSERT_TRUE(index->UnpinKvBlocks({1, 2}, &released).ok());
  // b's sequence attaches a's prefix, then extends it by a block.
  PrefixMatch hit = index->Lookup(kPlainNamespace, Tokens(12, 8), 11);
  ASSERT_EQ(hit.num_tokens, 8);
  ASSERT_TRUE(index->Acquire(hit).ok());
  ASSERT_TRUE(index->ReleaseCheckpoint(hit.checkpoint).ok());
  const PrefixInsertResult b = InsertOk(*index, Tokens(12, 8), {1, 2, 3});
  EXPECT_THAT(b.adopted_kv_blocks, ElementsAre(3));
  ASSERT_TRUE(index->UnpinKvBlocks({1, 2, 3}, &released).ok());
  EXPECT_THAT(released.kv_blocks, IsEmpty());
  // Use a: b becomes the least recent.
  const PrefixMatch m = index->Lookup(kPlainNamespace, Tokens(9), 8);
  ASSERT_EQ(m.checkpoint, a.checkpoint);
  ASSERT_TRUE(index->Acquire(m).ok());
  ASSERT_TRUE(index->ReleaseCheckpoint(m.checkpoint).ok());
  ASSERT_TRUE(index->UnpinKvBlocks(m.kv_blocks, &released).ok());
  EXPECT_EQ(index->num_evictable_kv_blocks(), 3);
  const PrefixInsertResult c = InsertOk(*index, Tokens(4, 0), {9});
  EXPECT_TRUE(c.inserted);
  EXPECT_EQ(c.checkpoint_slot, b.checkpoint_slot);  // b's slot, reused
  EXPECT_EQ(c.evicted.num_checkpoints, 1);
  EXPECT_THAT(c.evicted.kv_blocks, ElementsAre(3));  // 1 and 2 serve a
  EXPECT_TRUE(index->ContainsCheckpoint(kPlainNamespace, Tokens(8)));
  EXPECT_FALSE(index->ContainsCheckpoint(kPlainNamespace, Tokens(12, 8)));
  // Then a (its blocks 1, 2), then c, which its sequence still pins.
  PrefixEvictions next;
  ASSERT_TRUE(index->EvictLeastRecentlyUsed(&next));
  EXPECT_THAT(next.kv_blocks, ElementsAre(2, 1));  // leaf first
  ASSERT_TRUE(index->EvictLeastRecentlyUsed(&next));
  EXPECT_EQ(index->num_checkpoints(), 0);
  EXPECT_EQ(index->num_nodes(), 1);  // block 9, pinned by its sequence
  ExpectOk(*index);
}

TEST(PrefixIndexTest, AnEvictionThatPrunesTheInsertedPathIsSafe) {
  auto index = MakeIndex(1);
  InsertOk(*index, Tokens(8), {1, 2});
  PrefixEvictions released;
  ASSERT_TRUE(index->UnpinKvBlocks({1, 2}, &released).ok());
  // The only slot holds the checkpoint after 8 tokens; inserting one after
  // 12 (the same first 8) evicts it, which prunes blocks 1 and 2; the new
  // path is built from the caller's blocks.
  const PrefixInsertResult r = InsertOk(*index, Tokens(12), {5, 6, 7});
  EXPECT_TRUE(r.inserted);
  EXPECT_THAT(r.evicted.kv_blocks, ElementsAre(2, 1));
  EXPECT_THAT(r.adopted_kv_blocks, ElementsAre(5, 6, 7));
  EXPECT_THAT(index->Lookup(kPlainNamespace, Tokens(13), 12).kv_blocks,
              ElementsAre(5, 6, 7));
  EXPECT_EQ(index->KvBlockPinCount(5), 1);
}

TEST(PrefixIndexTest, EvictForKvBlocksStopsOnceEnoughAreFree) {
  auto index = MakeIndex(4);
  InsertOk(*index, Tokens(4, 0), {1});
  InsertOk(*index, Tokens(4, 1), {2});
  InsertOk(*index, Tokens(8, 2), {3, 4});
  PrefixEvictions released;
  ASSERT_TRUE(index->UnpinKvBlocks({1}, &released).ok());
  ASSERT_TRUE(index->UnpinKvBlocks({2}, &released).ok());
  ASSERT_TRUE(index->UnpinKvBlocks({3, 4}, &released).ok());
  EXPECT_EQ(index->num_evictable_kv_blocks(), 4);
  PrefixEvictions e = index->EvictForKvBlocks(2);
  EXPECT_EQ(e.num_checkpoints, 2);
  EXPECT_THAT(e.kv_blocks, ElementsAre(1, 2));
  EXPECT_EQ(index->num_evictable_kv_blocks(), 2);
  e = index->EvictForKvBlocks(0);
  EXPECT_EQ(e.num_checkpoints, 0);
  e = index->EvictForKvBlocks(100);
  EXPECT_THAT(e.kv_blocks, ElementsAre(4, 3));
  EXPECT_EQ(index->num_evictable_kv_blocks(), 0);
  EXPECT_EQ(index->num_evicted_checkpoints_total(), 3);
  ExpectOk(*index);
}

TEST(PrefixIndexTest, UnpinIgnoresForeignBlocksAndRefusesUnpinnedOnes) {
  auto index = MakeIndex(2);
  InsertOk(*index, Tokens(8), {1, 2});
  PrefixEvictions released;
  ASSERT_TRUE(index->UnpinKvBlocks({}, &released).ok());
  ASSERT_TRUE(index->UnpinKvBlocks({30, 31}, &released).ok());
  ASSERT_TRUE(index->UnpinKvBlocks({1, 2}, &released).ok());
  EXPECT_EQ(index->UnpinKvBlocks({1, 2}, &released).code(),
            absl::StatusCode::kFailedPrecondition);
  // A table that names a block twice is refused whole.
  InsertOk(*index, Tokens(12), {1, 2, 3});  // pins 3 only
  EXPECT_EQ(index->UnpinKvBlocks({3, 3}, &released).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(index->KvBlockPinCount(3), 1);
  EXPECT_THAT(released.kv_blocks, IsEmpty());
  ExpectOk(*index);
}

TEST(PrefixIndexTest, UnpinOfBlocksOnSeveralPathsStillPrunes) {
  auto index = MakeIndex(2);
  InsertOk(*index, Tokens(4, 0), {1});
  InsertOk(*index, Tokens(4, 1), {2});
  PrefixEvictions released;
  ASSERT_TRUE(index->EvictLeastRecentlyUsed(&released));
  ASSERT_TRUE(index->EvictLeastRecentlyUsed(&released));
  EXPECT_THAT(released.kv_blocks, IsEmpty());  // both pinned
  // Not one sequence's table, but each block is unpinned and pruned.
  ASSERT_TRUE(index->UnpinKvBlocks({2, 1}, &released).ok());
  EXPECT_THAT(released.kv_blocks, UnorderedElementsAre(1, 2));
  EXPECT_EQ(index->num_nodes(), 0);
  ExpectOk(*index);
}

TEST(PrefixIndexTest, ZeroBudgetCachesNothing) {
  auto index = MakeIndex(0);
  EXPECT_FALSE(index->HasRoomForCheckpoint());
  const PrefixInsertResult r = InsertOk(*index, Tokens(8), {1, 2});
  EXPECT_FALSE(r.inserted);
  EXPECT_THAT(r.adopted_kv_blocks, IsEmpty());
  EXPECT_EQ(index->num_kv_blocks(), 0);
  EXPECT_EQ(index->Lookup(kPlainNamespace, Tokens(9), 8).num_tokens, 0);
}

TEST(PrefixIndexTest, ABlockSizeOfOneMakesEveryTokenANode) {
  PrefixIndexConfig config;
  config.kv_block_size = 1;
  config.checkpoint_bytes = 1;
  config.max_checkpoint_bytes = 2;
  auto index = PrefixIndex::Create(config);
  ASSERT_TRUE(index.ok());
  const std::vector<int32_t> t = Tokens(3), blocks{4, 5, 6};
  auto r = (*index)->Insert({kPlainNamespace, t, blocks, -1});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->adopted_kv_blocks, ElementsAre(4, 5, 6));
  EXPECT_EQ((*index)->Lookup(kPlainNamespace, Tokens(5), 4).num_tokens, 3);
  EXPECT_TRUE((*index)->CheckInvariants().ok());
}

}  // namespace
}  // namespace tributary
