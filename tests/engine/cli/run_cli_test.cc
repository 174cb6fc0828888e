// tributary-run end to end: its --dump of a fixture prompt matches the
// transformers reference in the reference's own layout (so the dump format
// and the fixture format stay one format), its stdout is the generated text
// only, and bad input exits 1 with one line on stderr.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "../decoder/fixture_reference.h"
#include "cli_test_util.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

using namespace testing_fixtures;  // NOLINT: test-local helpers

using cli_testing::Result;

Result RunTool(const std::string& arguments) {
  return cli_testing::RunCommand(TRIBUTARY_RUN_BINARY, arguments, "run_cli");
}

TEST(RunCliTest, DumpMatchesTheFixtureReference) {
  const std::string dir = FixtureModelDirs().front();
  const std::vector<FixtureDump> dumps = ReadFixture(dir + "/reference.json");
  ASSERT_FALSE(dumps.empty());
  const FixtureDump& ref = dumps.back();
  const std::string path = testing::TempDir() + "/run_cli_dump.json";
  const Result r = RunTool(absl::StrCat(
      "--model ", dir, " --prompt-ids ", absl::StrJoin(ref.prompt_ids, ","),
      " --max-new-tokens ", ref.generated_ids.size(),
      " --ignore-eos --threads 1 --dump ", path));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(path);
  const nlohmann::json dump = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(dump.is_discarded());
  EXPECT_EQ(dump["prompt_ids"].get<std::vector<int32_t>>(), ref.prompt_ids);

  PrefillResult result;
  for (const auto& row : dump["logits"]) {
    for (double x : row) result.logits.push_back(static_cast<float>(x));
  }
  for (const auto& entry : dump["residual"]) {
    std::vector<std::array<double, 3>> per_token;
    for (size_t t = 0; t < entry["stream_norm"].size(); ++t) {
      per_token.push_back({entry["stream_norm"][t].get<double>(),
                           entry["update_norm"][t].get<double>(),
                           entry["sum_norm"][t].get<double>()});
    }
    result.norms.push_back(std::move(per_token));
  }
  result.final_stream_norm = dump["final_stream_norm"].get<std::vector<double>>();
  const int64_t vocab = static_cast<int64_t>(ref.logits.front().size());
  ExpectPrefillMatches(ref, result, vocab, 1e-4, "tributary-run --dump");

  // Greedy ids: equal wherever the reference is not a near-tie; stdout holds
  // the ids (the fixture models have no tokenizer).
  const std::vector<int32_t> generated =
      dump["generated_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(generated.size(), ref.generated_ids.size());
  EXPECT_EQ(generated.front(), ref.generated_ids.front());
  std::string expected_stdout;
  for (int32_t id : generated) absl::StrAppend(&expected_stdout, id, " ");
  EXPECT_EQ(r.out, expected_stdout + "\n");
}

TEST(RunCliTest, DefaultModelPrintsOnlyTheGeneratedText) {
  const Result r = RunTool(absl::StrCat(
      "--model ", SourcePath("models/tiny-shakespeare"),
      " --prompt 'ROMEO:' --max-new-tokens 12 --ignore-eos"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.find("loading"), std::string::npos);  // diagnostics on stderr
  EXPECT_NE(r.err.find("loaded model"), std::string::npos);
}

TEST(RunCliTest, BadInputExitsOneWithOneLine) {
  const std::string model = " --model " + SourcePath("models/tiny-shakespeare");
  for (const std::string& args :
       {std::string("--prompt-ids 1,x") + model,
        std::string("--prompt-ids 1,999999") + model,
        std::string("--prompt a --prompt-ids 1") + model,
        std::string("--bogus") + model,
        std::string("--max-new-tokens -1 --prompt a") + model,
        std::string("--cpu-matmul fp8 --prompt a") + model,
        std::string("--model /nonexistent --prompt-ids 1")}) {
    const Result r = RunTool(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    const size_t last_line = r.err.rfind("tributary-run: ");
    ASSERT_NE(last_line, std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find('\n', last_line), r.err.size() - 1) << r.err;
  }
}

// --cpu-matmul bf16 on the default model: the same greedy text as f32 (the
// model is well conditioned: its logits move by ~1e-3 of their range, below
// every top-2 margin of this continuation; checked 2026-11-29 to 40 tokens),
// and --dump shows that the flag took effect: the logits moved, slightly.
TEST(RunCliTest, Bf16MatMulsGenerateTheSameText) {
  const std::string base =
      absl::StrCat("--model ", SourcePath("models/tiny-shakespeare"),
                   " --prompt 'ROMEO:' --max-new-tokens 24 --ignore-eos");
  const std::string f32_dump = testing::TempDir() + "/run_cli_f32.json";
  const std::string bf16_dump = testing::TempDir() + "/run_cli_bf16.json";
  const Result f32 = RunTool(base + " --dump " + f32_dump);
  const Result bf16 = RunTool(base + " --cpu-matmul bf16 --dump " + bf16_dump);
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  if (bf16.exit_code != 0 &&
      bf16.err.find("AVX512_BF16") != std::string::npos) {
    GTEST_SKIP() << "no AVX512_BF16 on this CPU: " << bf16.err;
  }
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_GT(bf16.out.size(), 24u);
  EXPECT_EQ(bf16.out, f32.out);
  std::ifstream fa(f32_dump), fb(bf16_dump);
  const nlohmann::json a = nlohmann::json::parse(fa, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(fb, nullptr, false);
  ASSERT_FALSE(a.is_discarded() || b.is_discarded());
  ASSERT_EQ(a["logits"].size(), b["logits"].size());
  double max_ref = 0.0, max_diff = 0.0;
  for (size_t row = 0; row < a["logits"].size(); ++row) {
    for (size_t i = 0; i < a["logits"][row].size(); ++i) {
      const double x = a["logits"][row][i].get<double>();
      max_ref = std::max(max_ref, std::fabs(x));
      max_diff =
          std::max(max_diff, std::fabs(b["logits"][row][i].get<double>() - x));
    }
  }
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LE(max_diff, 5e-3 * max_ref);
}

TEST(RunCliTest, BadCpuMatMulValueIsNamed) {
  const Result r = RunTool("--cpu-matmul fp8 --prompt a --model " +
                           SourcePath("models/tiny-shakespeare"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("\"fp8\" is not one of f32, bf16"), std::string::npos)
      << r.err;
}

TEST(RunCliTest, SyntheticModelRunsOnTokenIds) {
  const Result r = RunTool(
      "--synthetic tiny --seed 3 --prompt-ids 1,2,3 --max-new-tokens 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Four generated ids, space-separated, each in the tiny vocabulary.
  std::istringstream ids(r.out);
  int id = -1, count = 0;
  while (ids >> id) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 512);
    ++count;
  }
  EXPECT_EQ(count, 4) << r.out;
  EXPECT_NE(r.err.find("synthetic:tiny"), std::string::npos) << r.err;
  // The same seed, the same model and the same tokens.
  EXPECT_EQ(RunTool("--synthetic tiny --seed 3 --prompt-ids 1,2,3 "
                    "--max-new-tokens 4").out,
            r.out);
}

TEST(RunCliTest, BadModelAndBackendChoicesAreNamed) {
  Result r = RunTool("--synthetic tiny --prompt hello");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--prompt-ids"), std::string::npos) << r.err;
  r = RunTool("--synthetic qwen9 --prompt-ids 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("qwen9"), std::string::npos) << r.err;
  r = RunTool("--synthetic tiny --model /nowhere --prompt-ids 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
  r = RunTool("--synthetic tiny --backend tpu --prompt-ids 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tpu"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tributary
