// A sticky device error (design.md §7): after an illegal address
// the CUDA context is unusable, so the backend must fail the step and every
// later call with UNAVAILABLE (what the engine treats as fatal: it fails all
// requests and the server exits non-zero for Kubernetes to restart it). Its
// own binary: on a GPU the dead context stays dead for the process.
//
// On a GPU the error is real (a gather far out of bounds); on the CPU
// emulation it is injected (the emulation cannot fault on a host address).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decoder_harness.h"
#include "engine/backend/backend_factory.h"
#if defined(TRIBUTARY_CUDA_EMULATION)
#include "engine/backend/cuda/emulation/cuda_emulation.h"
#endif

namespace tributary {
namespace {

using namespace testing_fixtures;  // NOLINT: test-local helpers

// Makes the device hit an illegal address.
void BreakTheDevice(Backend& backend) {
#if defined(TRIBUTARY_CUDA_EMULATION)
  (void)backend;
  cuda_emulation::InjectStickyError(cudaErrorIllegalAddress);
#else
  // Row 2^30 of a one-row tensor: gigabytes past any allocation.
  auto src = backend.Allocate(ElementType::kBF16, Shape{1, 4096});
  auto rows = backend.Allocate(ElementType::kI32, Shape{1});
  auto dst = backend.Allocate(ElementType::kBF16, Shape{1, 4096});
  ASSERT_TRUE(src.ok() && rows.ok() && dst.ok());
  const int32_t far = 1 << 30;
  ASSERT_TRUE(backend.CopyFromHost(&far, *rows).ok());
  backend.GatherRows(*src, *rows, *dst);
#endif
}

TEST(CudaStickyErrorTest, ADeadDeviceFailsEveryLaterCallWithUnavailable) {
  std::string why;
  if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
  Harness h(SourcePath("models/tiny-shakespeare"), 64, 2, BackendKind::kCuda);
  ASSERT_TRUE(h.ok());
  BatchLayout layout;
  layout.sequences.push_back(Slice(0, 3, 0, 0, {0}));
  const std::vector<int32_t> ids = {5, 6, 7};
  ASSERT_TRUE(h.decoder().Forward(layout, ids, ForwardOptions{}).ok());

  BreakTheDevice(h.backend());
  auto failed = h.decoder().Forward(layout, ids, ForwardOptions{});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable)
      << failed.status();
  EXPECT_NE(failed.status().message().find("cudaErrorIllegalAddress"),
            std::string::npos)
      << failed.status();
  // It stays dead: the next step, an allocation and a synchronize all fail.
  auto again = h.decoder().Forward(layout, ids, ForwardOptions{});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(h.backend().Allocate(ElementType::kF32, Shape{4}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(h.backend().Synchronize().code(), absl::StatusCode::kUnavailable);
#if defined(TRIBUTARY_CUDA_EMULATION)
  cuda_emulation::ClearStickyError();
#endif
}

}  // namespace
}  // namespace tributary
