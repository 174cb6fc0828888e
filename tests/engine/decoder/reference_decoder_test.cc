// The reference decoder against Hugging Face transformers (float32, pure
// PyTorch path) on every committed fixture (tests/fixtures/README.md):
// logits at every prompt position and the residual norms of every sublayer
// within 1e-4 (design.md §7), and the greedy continuation teacher-forced
// through the decode path wherever the reference's margin is not a near-tie.
#include "engine/decoder/reference_decoder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/model_directory.h"
#include "fixture_reference.h"

namespace tributary {
namespace {

using namespace testing_fixtures;  // NOLINT: test-local helpers

constexpr double kTolerance = 1e-4;

PrefillResult ToPrefillResult(const ReferenceStepResult& step) {
  PrefillResult result;
  result.logits = step.logits;
  for (const SublayerTrace& trace : step.residual) {
    std::vector<std::array<double, 3>> per_token;
    for (const auto& s : trace.tokens) {
      per_token.push_back({s.stream_norm, s.update_norm, s.sum_norm});
    }
    result.norms.push_back(std::move(per_token));
  }
  result.final_stream_norm.assign(step.final_stream_norm.begin(),
                                  step.final_stream_norm.end());
  return result;
}

void CheckModel(const std::string& model_dir, const std::string& fixture_path,
                const std::string& name) {
  auto model = ModelDirectory::Load(model_dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t vocab = model->config().vocab_size;
  const std::vector<FixtureDump> dumps = ReadFixture(fixture_path);
  ASSERT_FALSE(dumps.empty()) << fixture_path;
  for (size_t p = 0; p < dumps.size(); ++p) {
    const FixtureDump& dump = dumps[p];
    const std::string label = name + " prompt " + std::to_string(p);
    auto decoder = ReferenceDecoder::Create(
        model->config(), model->weights(),
        static_cast<int64_t>(dump.prompt_ids.size() + dump.generated_ids.size()));
    ASSERT_TRUE(decoder.ok()) << decoder.status();
    auto prefill = decoder->Forward(dump.prompt_ids);
    ASSERT_TRUE(prefill.ok()) << prefill.status();
    ExpectPrefillMatches(dump, ToPrefillResult(*prefill), vocab, kTolerance, label);
    std::vector<float> last(prefill->logits.end() - vocab, prefill->logits.end());
    ExpectGreedyMatches(
        dump, last,
        [&](int32_t id) {
          auto step = decoder->Forward({id});
          EXPECT_TRUE(step.ok()) << step.status();
          return step.ok() ? step->logits : std::vector<float>();
        },
        vocab, label);
  }
}

TEST(ReferenceDecoderFixtureTest, MatchesTransformersOnEveryFixture) {
  const std::vector<std::string> dirs = FixtureModelDirs();
  ASSERT_GE(dirs.size(), 6u) << "fixtures missing under "
                             << SourcePath("tests/fixtures/models");
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    CheckModel(dir, dir + "/reference.json",
               std::filesystem::path(dir).filename().string());
  }
}

TEST(ReferenceDecoderFixtureTest, DefaultModelGreedyTextIsPinned) {
  CheckModel(SourcePath("models/tiny-shakespeare"),
             SourcePath("tests/fixtures/default-model/reference.json"),
             "default model");
}

TEST(ReferenceDecoderTest, PrefillEqualsTokenByTokenDecode) {
  const std::vector<std::string> dirs = FixtureModelDirs();
  ASSERT_FALSE(dirs.empty());
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    auto model = ModelDirectory::Load(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    const int64_t vocab = model->config().vocab_size;
    std::vector<int32_t> ids;
    for (int i = 0; i < 70; ++i) ids.push_back((i * 37 + 11) % vocab);
    auto whole = ReferenceDecoder::Create(model->config(), model->weights(), 70);
    auto stepped = ReferenceDecoder::Create(model->config(), model->weights(), 70);
    ASSERT_TRUE(whole.ok() && stepped.ok());
    auto all = whole->Forward(ids);
    ASSERT_TRUE(all.ok()) << all.status();
    // The first token alone, then one at a time (recurrent path), with one
    // chunked continuation of 17 tokens in the middle.
    std::vector<float> logits;
    size_t pos = 0;
    while (pos < ids.size()) {
      const size_t n = (pos == 20) ? 17 : 1;
      auto out = stepped->Forward(absl::MakeConstSpan(ids).subspan(pos, n));
      ASSERT_TRUE(out.ok()) << out.status();
      logits.insert(logits.end(), out->logits.begin(), out->logits.end());
      pos += n;
    }
    ASSERT_EQ(logits.size(), all->logits.size());
    for (size_t t = 0; t < ids.size(); ++t) {
      const std::vector<double> ref(all->logits.begin() + t * vocab,
                                    all->logits.begin() + (t + 1) * vocab);
      const RowError e = CompareRow(logits.data() + t * vocab, ref);
      EXPECT_LE(e.max_diff, 1e-4 * e.max_ref) << "position " << t;
    }
  }
}

TEST(ReferenceDecoderTest, RejectsBadInputWithoutChangingState) {
  const std::vector<std::string> dirs = FixtureModelDirs();
  ASSERT_FALSE(dirs.empty());
  auto model = ModelDirectory::Load(dirs.front());
  ASSERT_TRUE(model.ok()) << model.status();
  auto decoder = ReferenceDecoder::Create(model->config(), model->weights(), 4);
  ASSERT_TRUE(decoder.ok());
  EXPECT_EQ(decoder->Forward({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const int32_t too_big = static_cast<int32_t>(model->config().vocab_size);
  auto bad = decoder->Forward({1, too_big});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(std::to_string(too_big)),
            std::string::npos);
  EXPECT_EQ(decoder->num_tokens(), 0);
  ASSERT_TRUE(decoder->Forward({1, 2, 3}).ok());
  EXPECT_EQ(decoder->Forward({1, 2}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(decoder->num_tokens(), 3);
  EXPECT_FALSE(ReferenceDecoder::Create(model->config(), model->weights(), 0).ok());
}

}  // namespace
}  // namespace tributary
