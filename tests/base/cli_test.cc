#include "base/cli.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

namespace tributary {
namespace {

TEST(CliArgsTest, ParsesValueBoolAndPositional) {
  const char* argv[] = {"tool", "--model", "dir", "--n=3", "--verbose", "pos"};
  auto args = CliArgs::Parse(6, argv, {"model", "n"}, {"verbose"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->GetOr("model", ""), "dir");
  EXPECT_EQ(*args->GetInt("n", 0, 0, 10), 3);
  EXPECT_TRUE(args->Has("verbose"));
  ASSERT_EQ(args->positional().size(), 1u);
  EXPECT_EQ(args->positional()[0], "pos");
}

TEST(CliArgsTest, RejectsUnknownFlagAndMissingValue) {
  const char* unknown[] = {"tool", "--bogus"};
  auto a = CliArgs::Parse(2, unknown, {"model"}, {});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--bogus"), std::string::npos);
  const char* missing[] = {"tool", "--model"};
  auto b = CliArgs::Parse(2, missing, {"model"}, {});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("needs a value"), std::string::npos);
}

TEST(CliArgsTest, IntegerRangeErrorNamesFlag) {
  const char* argv[] = {"tool", "--n", "99"};
  auto args = CliArgs::Parse(3, argv, {"n"}, {});
  ASSERT_TRUE(args.ok());
  auto n = args->GetInt("n", 0, 0, 10);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("--n"), std::string::npos);
}

TEST(RunCliMainTest, MapsStatusAndExceptionsToExitOne) {
  EXPECT_EQ(RunCliMain("t", [] { return absl::OkStatus(); }), 0);
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunCliMain("t", [] { return absl::InvalidArgumentError("bad\nx"); }),
            1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "t: bad x\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunCliMain("t", []() -> absl::Status { throw std::bad_alloc(); }),
            1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "t: out of memory\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(RunCliMain("t",
                       []() -> absl::Status {
                         throw std::runtime_error("boom");
                       }),
            1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "t: internal error: boom\n");
}

}  // namespace
}  // namespace tributary
