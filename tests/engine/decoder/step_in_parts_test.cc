// A step in parts (Backend::StepParts, RunInParts): the CPU backend runs a
// step of several sequences as parts of contiguous sequences, one per
// thread. Every output of the step must be the bits of the same step in one
// piece: logits of every row, device choices and logprobs, residual
// statistics, and the caches it leaves for the next step.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "decoder_harness.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"

namespace tributary {
namespace {

using testing_fixtures::Slice;
using testing_fixtures::SourcePath;

struct Decoder {
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<HybridDecoder> decoder;
};

Decoder MakeDecoder(const ModelDirectory& model, int threads, bool in_parts) {
  Decoder d;
  CpuBackendOptions options;
  options.num_threads = threads;
  options.step_in_parts = in_parts;
  // Every step of several sequences in parts, however few its tokens and
  // however uneven its parts, so that the decode steps below and the
  // uneven prefill run in parts too.
  options.min_part_tokens = 1;
  options.max_part_imbalance = 1e9;
  auto backend = CpuBackend::Create(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return d;
  d.backend = std::move(*backend);
  auto decoder = HybridDecoder::Create(model.config(), model.weights(),
                                       d.backend.get(), {64, 16, 8});
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (decoder.ok()) d.decoder = std::move(*decoder);
  return d;
}

// Prompt ids from a fixed linear congruential sequence.
std::vector<int32_t> Ids(int64_t n, uint32_t seed, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    ids.push_back(static_cast<int32_t>((seed >> 8) % vocab));
  }
  return ids;
}

void ExpectSameOutput(const ForwardOutput& parts, const ForwardOutput& piece,
                      const std::string& what,
                      const ForwardOptions& options = {}) {
  SCOPED_TRACE(what);
  EXPECT_EQ(parts.logit_rows, piece.logit_rows);
  EXPECT_EQ(parts.logits, piece.logits);
  EXPECT_EQ(parts.device_ids, piece.device_ids);
  ASSERT_EQ(parts.device_logprobs.size(), piece.device_logprobs.size());
  for (size_t r = 0; r < parts.device_logprobs.size(); ++r) {
    // Only the rows that asked have logprobs (the rest are unspecified).
    if (options.token_choices[r].num_logprobs < 0 || !options.device_choice[r]) {
      continue;
    }
    const TokenLogprobs& a = parts.device_logprobs[r];
    const TokenLogprobs& b = piece.device_logprobs[r];
    EXPECT_EQ(a.chosen, b.chosen) << "row " << r;
    ASSERT_EQ(a.count, b.count) << "row " << r;
    for (int k = 0; k < a.count; ++k) {
      EXPECT_EQ(a.top_ids[k], b.top_ids[k]) << "row " << r;
      EXPECT_EQ(a.top_logprobs[k], b.top_logprobs[k]) << "row " << r;
    }
  }
  EXPECT_EQ(parts.residual_stats, piece.residual_stats);
  EXPECT_EQ(parts.final_stream_norm, piece.final_stream_norm);
}

// Three threads, so parts of unequal sequence counts: a prefill of five
// prompts of very different lengths, then a step that mixes decode tokens
// with a prefill chunk and draws on the backend with penalties and
// logprobs, then plain decodes. Each against the same steps in one piece.
TEST(StepInPartsTest, EveryOutputIsTheBitsOfTheStepInOnePiece) {
  auto model = ModelDirectory::Load(SourcePath("models/tiny-shakespeare"));
  ASSERT_TRUE(model.ok()) << model.status();
  Decoder parts = MakeDecoder(*model, 3, true);
  Decoder piece = MakeDecoder(*model, 2, false);
  ASSERT_TRUE(parts.decoder && piece.decoder);
  const int64_t vocab = model->config().vocab_size;

  std::vector<int64_t> lengths = {5, 70, 1, 33, 12};
  BatchLayout layout;
  std::vector<int32_t> ids;
  int32_t next_block = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::vector<int32_t> blocks;
    for (int64_t p = 0; p < lengths[i] + 40; p += 16) blocks.push_back(next_block++);
    layout.sequences.push_back(Slice(static_cast<int64_t>(ids.size()), lengths[i], 0,
                                     static_cast<int32_t>(4 - i), blocks));
    const std::vector<int32_t> p = Ids(lengths[i], static_cast<uint32_t>(i), vocab);
    ids.insert(ids.end(), p.begin(), p.end());
  }
  ASSERT_EQ(parts.backend->StepParts(layout), 3);
  ASSERT_EQ(piece.backend->StepParts(layout), 1);
  for (int32_t slot = 0; slot < 5; ++slot) {
    ASSERT_TRUE(parts.decoder->ResetStateSlot(slot).ok());
    ASSERT_TRUE(piece.decoder->ResetStateSlot(slot).ok());
  }
  ForwardOptions all_rows;
  all_rows.logits_for_all_tokens = true;
  auto a = parts.decoder->Forward(layout, ids, all_rows);
  auto b = piece.decoder->Forward(layout, ids, all_rows);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  ExpectSameOutput(*a, *b, "prefill, logits of every row");

  // Sequence 1 takes a chunk of 9 more tokens; the others decode one.
  std::vector<int32_t> step_ids;
  for (size_t i = 0; i < lengths.size(); ++i) {
    SequenceSlice& s = layout.sequences[i];
    const int64_t n = i == 1 ? 9 : 1;
    s = Slice(static_cast<int64_t>(step_ids.size()), n, lengths[i], s.state_slot,
              s.block_table);
    const std::vector<int32_t> more = Ids(n, static_cast<uint32_t>(100 + i), vocab);
    step_ids.insert(step_ids.end(), more.begin(), more.end());
    lengths[i] += n;
  }
  ForwardOptions draws;
  draws.device_choice = {true, true, false, true, true};
  draws.token_choices.assign(5, TokenChoice{0.8f, 20, 0.9f, 0.02f, 0.25});
  draws.token_choices[3].num_logprobs = 5;
  draws.token_choices[0].num_logprobs = 2;
  draws.token_history.assign(6, TokenHistoryEntry{});
  for (int e = 0; e < 6; ++e) draws.token_history[e].token_id = 3 * e;
  draws.token_choices[1].repetition_penalty = 1.3f;
  draws.token_choices[1].history_begin = 0;
  draws.token_choices[1].history_count = 4;
  draws.token_choices[4].presence_penalty = 0.5f;
  draws.token_choices[4].history_begin = 4;
  draws.token_choices[4].history_count = 2;
  a = parts.decoder->Forward(layout, step_ids, draws);
  b = piece.decoder->Forward(layout, step_ids, draws);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  ASSERT_EQ(a->device_ids.size(), 5u);
  ASSERT_EQ(a->device_logprobs.size(), 5u);
  ExpectSameOutput(*a, *b, "a chunk among decodes, drawn on the backend", draws);

  // Plain decodes on what both left in their caches.
  for (int step = 0; step < 3; ++step) {
    step_ids.clear();
    for (size_t i = 0; i < lengths.size(); ++i) {
      SequenceSlice& s = layout.sequences[i];
      s = Slice(static_cast<int64_t>(i), 1, lengths[i]++, s.state_slot, s.block_table);
      step_ids.push_back(static_cast<int32_t>((7 * i + step) % vocab));
    }
    a = parts.decoder->Forward(layout, step_ids, ForwardOptions{});
    b = piece.decoder->Forward(layout, step_ids, ForwardOptions{});
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
    ExpectSameOutput(*a, *b, "decode " + std::to_string(step));
  }
}

TEST(StepInPartsTest, CpuBackendSaysHowManyPartsAndRefusesMore) {
  CpuBackendOptions options;
  options.num_threads = 2;
  auto backend = CpuBackend::Create(options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  BatchLayout one, three;
  one.sequences.resize(1);
  one.sequences[0].num_tokens = 100;
  three.sequences.resize(3);
  EXPECT_EQ((*backend)->StepParts(one), 1);
  // min_part_tokens (4 by default): 2 parts from 8 tokens.
  for (SequenceSlice& s : three.sequences) s.num_tokens = 2;
  EXPECT_EQ((*backend)->StepParts(three), 1);  // 6 tokens
  three.sequences[2].num_tokens = 4;
  EXPECT_EQ((*backend)->StepParts(three), 2);  // 8
  // max_part_imbalance (1.5 by default): a prompt chunk beside one decode
  // would be a part of 32 tokens and one of 1; beside 31 decodes, parts of
  // 31 and 32.
  BatchLayout chunk;
  chunk.sequences.resize(2);
  chunk.sequences[0].num_tokens = 1;
  chunk.sequences[1].num_tokens = 32;
  EXPECT_EQ((*backend)->StepParts(chunk), 1);
  chunk.sequences.resize(32);
  for (SequenceSlice& s : chunk.sequences) s.num_tokens = 1;
  chunk.sequences.back().num_tokens = 32;
  EXPECT_EQ((*backend)->StepParts(chunk), 2);
  EXPECT_EQ(chunk.PartBegins(2), (std::vector<int64_t>{0, 31, 32}));

  std::vector<int> ran(2, 0);
  EXPECT_TRUE((*backend)
                  ->RunInParts(2, [&](int p, Backend& part) {
                    EXPECT_NE(&part, backend->get());
                    ++ran[p];
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(ran, (std::vector<int>{1, 1}));
  // A part's error comes back (the first by part order); every part ran.
  absl::Status status = (*backend)->RunInParts(2, [&](int p, Backend&) {
    ++ran[p];
    return p == 1 ? absl::InternalError("part 1 failed") : absl::OkStatus();
  });
  EXPECT_EQ(status.message(), "part 1 failed");
  EXPECT_EQ(ran, (std::vector<int>{2, 2}));
  status = (*backend)->RunInParts(3, [](int, Backend&) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("at most 2"), std::string::npos) << status;

  // Weights far beyond any shared cache (a 4 GiB f32 matrix, never read:
  // PrepareMatMulWeight keeps f32 matrices as they are): each part would
  // stream them all, so only steps of 64 tokens a part or more run apart.
  static float never_read = 0.0f;
  Tensor huge;
  huge.data = &never_read;
  huge.type = ElementType::kF32;
  huge.shape = Shape{int64_t{1} << 20, int64_t{1} << 10};
  auto prepared = (*backend)->PrepareMatMulWeight(huge);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ((*backend)->matmul_weight_bytes(), int64_t{4} << 30);
  three.sequences[0].num_tokens = 42;
  three.sequences[1].num_tokens = 42;
  three.sequences[2].num_tokens = 43;
  EXPECT_EQ((*backend)->StepParts(three), 1);  // 127 tokens for 2 parts
  three.sequences[1].num_tokens = 43;
  EXPECT_EQ((*backend)->StepParts(three), 2);  // 128: 85 and 43

  options.min_part_tokens = 0;
  auto bad = CpuBackend::Create(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("min_part_tokens"), std::string::npos)
      << bad.status();
  options.min_part_tokens = 4;
  options.max_part_imbalance = 0.5;
  bad = CpuBackend::Create(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("max_part_imbalance"),
            std::string::npos)
      << bad.status();
  options.max_part_imbalance = 1.5;
  options.step_in_parts = false;
  auto whole = CpuBackend::Create(options);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)->StepParts(three), 1);
  options.step_in_parts = true;
  options.num_threads = 1;
  auto single = CpuBackend::Create(options);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)->StepParts(three), 1);
}

}  // namespace
}  // namespace tributary
