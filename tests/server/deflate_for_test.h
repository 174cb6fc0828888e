// zlib's deflate for tests that send compressed bodies: window_bits
// 15 + 16 writes gzip, 15 zlib-wrapped deflate, -15 raw deflate.
#ifndef TRIBUTARY_TESTS_SERVER_DEFLATE_FOR_TEST_H_
#define TRIBUTARY_TESTS_SERVER_DEFLATE_FOR_TEST_H_

#include <zlib.h>

#include <string>

#include "gtest/gtest.h"

namespace tributary {
namespace testing_util {

inline std::string Deflate(const std::string& text, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&z, text.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline std::string Gzip(const std::string& text) { return Deflate(text, 15 + 16); }

}  // namespace testing_util
}  // namespace tributary

#endif  // TRIBUTARY_TESTS_SERVER_DEFLATE_FOR_TEST_H_
