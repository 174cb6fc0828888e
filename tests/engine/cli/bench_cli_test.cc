// tributary-bench end to end: the roofline it reports is the work of the
// steps it ran (one prompt, then decodes, each step's FLOPs and bytes those
// of ForwardWork for that step's shape) over the ceilings it was given, and
// bad ceilings exit 1 naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli_test_util.h"
#include "engine/decoder/forward_work.h"
#include "engine/model/model_directory.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

using cli_testing::Result;

Result RunBench(const std::string& arguments) {
  return cli_testing::RunCommand(
      TRIBUTARY_BENCH_BINARY,
      absl::StrCat("--model ", TRIBUTARY_MODEL_DIR, " ", arguments),
      "bench_cli");
}

// One request of a 5-token prompt and 4 generated tokens: a prefill step
// (its last token sampled), then 3 decodes at positions 5, 6 and 7.
TEST(BenchCliTest, TheRooflineIsTheStepsWorkOverTheCeilings) {
  constexpr double kPeakGflops = 100.0, kReadGbps = 20.0;
  const Result r = RunBench(absl::StrCat(
      "--num-requests 1 --prompt-tokens 5 --output-tokens 4 --concurrency 1 "
      "--warmup 0 --threads 1 --json --step-work --peak-gflops ",
      kPeakGflops, " --read-gbps ", kReadGbps));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.out;

  auto model = ModelDirectory::Load(TRIBUTARY_MODEL_DIR);
  ASSERT_TRUE(model.ok()) << model.status();
  // The CPU backend's activations are f32.
  const ForwardWork work =
      ForwardWorkOf(model->config(), model->weights(), sizeof(float));
  StepShape prefill;
  prefill.sequences = 1;
  prefill.tokens = 5;
  prefill.logit_rows = 1;
  prefill.attended_keys = 1 + 2 + 3 + 4 + 5;
  prefill.context_tokens = 5;
  std::vector<StepShape> shapes = {prefill};
  for (int64_t position : {5, 6, 7}) {
    StepShape decode;
    decode.sequences = 1;
    decode.tokens = 1;
    decode.logit_rows = 1;
    decode.attended_keys = position + 1;
    decode.context_tokens = position + 1;
    shapes.push_back(decode);
  }

  const nlohmann::json& steps = report["step_work"];
  ASSERT_EQ(steps.size(), shapes.size()) << steps.dump();
  double floor = 0.0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_DOUBLE_EQ(steps[i][0].get<double>(), work.Flops(shapes[i]));
    EXPECT_DOUBLE_EQ(steps[i][1].get<double>(), work.Bytes(shapes[i]));
    floor += std::max(work.Flops(shapes[i]) / (kPeakGflops * 1e9),
                      work.Bytes(shapes[i]) / (kReadGbps * 1e9));
  }
  EXPECT_EQ(report["weight_bytes"].get<int64_t>(), work.weight_bytes);
  EXPECT_NEAR(report["steps"]["floor_seconds"].get<double>(), floor,
              1e-9 * floor);
  const nlohmann::json& roofline = report["roofline"];
  EXPECT_NEAR(roofline["ceiling_tokens_per_second"].get<double>(), 4 / floor,
              1e-6 * (4 / floor));
  EXPECT_NEAR(roofline["fraction_of_ceiling"].get<double>(),
              report["generated_tokens_per_second"].get<double>() * floor / 4,
              1e-6);
}

TEST(BenchCliTest, BadCeilingsExitWithTheFlagNamed) {
  const std::string load = "--num-requests 1 --output-tokens 1 --warmup 0 ";
  Result r = RunBench(load + "--peak-gflops 100");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--peak-gflops and --read-gbps"), std::string::npos)
      << r.err;
  r = RunBench(load + "--peak-gflops 100 --read-gbps 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--read-gbps must be a positive rate"),
            std::string::npos)
      << r.err;
  r = RunBench(load + "--peak-gflops fast --read-gbps 5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--peak-gflops: 'fast' is not a number"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tributary
