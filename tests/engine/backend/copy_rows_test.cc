// Backend::CopyRows on the CPU backend (the reference the CUDA backend is
// tested against in cuda_backend_test.cc): the rows it is given are copied
// byte for byte, every other row is left as it was, in any element type
// and rank, forwards and backwards in the tensor.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"

namespace tributary {
namespace {

TEST(CpuBackendCopyRowsTest, CopiesItsRowsAndNothingElse) {
  auto backend = CpuBackend::Create({1});
  ASSERT_TRUE(backend.ok()) << backend.status();
  CpuBackend& b = **backend;
  struct Case {
    ElementType type;
    Shape shape;
    int64_t src, dst, rows;
  };
  const Case cases[] = {
      {ElementType::kF32, Shape{6, 3, 5}, 1, 4, 2},      // a window pool
      {ElementType::kF32, Shape{5, 2, 4, 4}, 4, 0, 1},   // a state pool, back
      {ElementType::kBF16, Shape{7, 16, 2, 8}, 2, 5, 2}, // a KV pool
      {ElementType::kF32, Shape{3, 4}, 0, 2, 0},         // nothing
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shape.ToString());
    auto t = b.Allocate(c.type, c.shape);
    ASSERT_TRUE(t.ok());
    std::vector<uint8_t> before(t->size_bytes());
    for (size_t i = 0; i < before.size(); ++i) {
      before[i] = static_cast<uint8_t>(i * 37 + 11);
    }
    ASSERT_TRUE(b.CopyFromHost(before.data(), *t).ok());
    b.CopyRows(*t, c.src, c.dst, c.rows);
    ASSERT_TRUE(b.Synchronize().ok());
    std::vector<uint8_t> after(t->size_bytes());
    ASSERT_TRUE(b.CopyToHost(*t, after.data()).ok());
    const size_t row_bytes = t->size_bytes() / c.shape[0];
    for (int64_t r = 0; r < c.shape[0]; ++r) {
      const bool copied = r >= c.dst && r < c.dst + c.rows;
      const int64_t from = copied ? c.src + (r - c.dst) : r;
      EXPECT_EQ(std::memcmp(after.data() + r * row_bytes,
                            before.data() + from * row_bytes, row_bytes),
                0)
          << "row " << r << (copied ? " (copied)" : " (untouched)");
    }
    b.Free(*t);
  }
}

}  // namespace
}  // namespace tributary
