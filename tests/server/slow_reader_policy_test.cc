// The one cut-off rule of the gRPC and HTTP streams.
#include "server/slow_reader_policy.h"

#include "gtest/gtest.h"

namespace tributary {
namespace {

TEST(SlowReaderPolicyTest, CutsOffPastTheTokenBoundOrAWriteLongerThanItsBound) {
  SlowReaderPolicy policy;
  policy.max_pending_tokens = 8;
  policy.max_write_pending = absl::Seconds(2);
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(policy.CutsOff(8, std::nullopt, now));  // at the bound: kept
  EXPECT_TRUE(policy.CutsOff(9, std::nullopt, now));
  EXPECT_FALSE(policy.CutsOff(0, now - absl::Seconds(2), now));
  EXPECT_TRUE(policy.CutsOff(0, now - absl::Seconds(3), now));
  // No write in flight: only the tokens count.
  EXPECT_FALSE(policy.CutsOff(1, std::nullopt, now + absl::Hours(1)));
  EXPECT_EQ(policy.Message(),
            "the client stopped reading: more than 8 tokens waited for it, or "
            "one write was pending for over 2s");
}

}  // namespace
}  // namespace tributary
