// ScopedFlushDenormals: subnormal f32 numbers read and written as zero on the
// calling thread for the object's lifetime (the SSE/AVX control register's
// FTZ and DAZ bits), restored after.
//
// Why: x86 cores take a microcode assist for arithmetic on or producing a
// subnormal number (on the AVX-512 VMs these figures come from, the kernels
// below ran 14–16× slower; some other cores are said to pay less). Kernels
// whose values decay exponentially meet them in bulk: the chunked delta
// rule's decays e^(G_i − G_j) fall below 2^−126 when a head forgets fast,
// and the products that use them run ~16× slower (bench/cpu/delta_rule_bench
// --max-log-decay 4: 24.7 against 1.5 µs a token and head). Each flushed
// number is below 2^−126 (1.2e−38) in magnitude, far under the kernels'
// rounding against the reference. Every ISA path of a kernel runs under the
// same flags, so they still give identical bits.
//
// The whole register is put back at the end, status flags included: an
// exception flag (overflow, invalid, …) raised inside does not reach the
// caller's fetestexcept. Nothing in Tributary reads them; this keeps a
// kernel free of side effects on the thread it borrows.
//
// Thread safety: affects the calling thread only. Not copyable.
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_FLUSH_DENORMALS_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_FLUSH_DENORMALS_H_

#include <xmmintrin.h>

namespace tributary {

class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
  }
  ~ScopedFlushDenormals() { _mm_setcsr(saved_); }
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  static constexpr unsigned kFlushToZero = 1u << 15;      // MXCSR.FTZ
  static constexpr unsigned kDenormalsAreZero = 1u << 6;  // MXCSR.DAZ
  const unsigned saved_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_FLUSH_DENORMALS_H_
