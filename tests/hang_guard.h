// How long a test waits for something that must happen eventually (a final
// event, an idle engine, a count reached) before it calls the wait a hang.
// It is not a speed expectation: the emulated GPU tests running beside each
// other on a loaded 2-core machine are slow, not hung, and a test's result
// must not depend on how fast the machine runs it. So the guard sits far
// above any wait seen in a run and below CTest's default per-test timeout
// (1500 s), which stays the last resort.
#ifndef TRIBUTARY_TESTS_HANG_GUARD_H_
#define TRIBUTARY_TESTS_HANG_GUARD_H_

#include "absl/time/time.h"

namespace tributary {
namespace testing_util {

inline constexpr absl::Duration kHangGuard = absl::Minutes(10);

}  // namespace testing_util
}  // namespace tributary

#endif  // TRIBUTARY_TESTS_HANG_GUARD_H_
