// The request fuzzer's seed corpus (tests/fuzz/corpus/request/: OpenAI
// bodies and serialized gRPC GenerateRequests) replayed in every build: every seed keeps the properties of
// tests/fuzz/request_properties.h, and the seeds' outcomes are the
// ones they were written for (so that a seed the parser stops accepting
// does not silently stop exploring the accepted paths).
#include <string>

#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_corpus.h"
#include "tests/fuzz/request_properties.h"

namespace tributary {
namespace {

class RequestCorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = RequestProperties::Create(std::string(TRIBUTARY_SOURCE_DIR) +
                                             "/models/tiny-shakespeare");
    ASSERT_TRUE(p.ok()) << p.status();
    properties_ = std::move(*p);
  }
  std::string OutcomeOf(const std::string& input) const {
    return properties_->Outcome(reinterpret_cast<const uint8_t*>(input.data()),
                                input.size());
  }
  std::unique_ptr<RequestProperties> properties_;
};

TEST_F(RequestCorpusTest, EverySeedKeepsTheProperties) {
  int seeds = 0;
  for (const auto& path : FuzzCorpusFiles("request")) {
    ++seeds;
    const std::string input = ReadCorpusFile(path);
    EXPECT_EQ(properties_->Check(reinterpret_cast<const uint8_t*>(input.data()),
                                 input.size()),
              "")
        << path.filename();
  }
  EXPECT_GE(seeds, 8);
}

TEST_F(RequestCorpusTest, TheSeedsHaveTheirOutcomes) {
  for (const auto& path : FuzzCorpusFiles("request")) {
    const std::string name = path.filename().string();
    const std::string outcome = OutcomeOf(ReadCorpusFile(path));
    SCOPED_TRACE(name + ": " + outcome);
    if (name == "completions_wrong_model" || name == "chat_model_name_cut") {
      EXPECT_EQ(outcome.rfind("refused 404 model", 0), 0u);
    } else if (name == "chat_empty" || name == "completions_bad_ranges") {
      EXPECT_TRUE(outcome.rfind("refused 400", 0) == 0 ||
                  outcome.rfind("invalid ", 0) == 0);
    } else {
      EXPECT_EQ(outcome.rfind("accepted ", 0), 0u);
    }
  }
}

TEST_F(RequestCorpusTest, BodiesThatAreNotRequestsAreRefused) {
  // Not JSON at all, and a body that is not an object: refusals, kept.
  EXPECT_EQ(OutcomeOf("0not json").rfind("refused 400", 0), 0u) << OutcomeOf("0not json");
  EXPECT_EQ(OutcomeOf("1[1, 2]").rfind("refused 400", 0), 0u) << OutcomeOf("1[1, 2]");
  EXPECT_EQ(OutcomeOf(""), "empty");
  // gRPC: bytes that are no GenerateRequest, and an empty one (no input).
  EXPECT_EQ(OutcomeOf("2\xff\xff\xff"), "unparsed");
  EXPECT_EQ(OutcomeOf("2").rfind("invalid: input", 0), 0u) << OutcomeOf("2");
}

}  // namespace
}  // namespace tributary
