"""The C++ every generated kernel starts with.

No CUDA headers: `cuda_fp16.h` and `cuda_bf16.h` alone cost NVRTC over a second per
program, so half and bfloat16 are two-byte storage structs converted with PTX `cvt` (as
nvFuser does), and the few math overloads kernels need are defined here.
"""

PREAMBLE = r"""
// ---- tunefuse preamble -------------------------------------------------------------
struct __align__(2) tf_half { unsigned short x; };
struct __align__(2) tf_bf16 { unsigned short x; };

__device__ __forceinline__ float tf_h2f(tf_half h) {
  float f; asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h.x)); return f;
}
__device__ __forceinline__ tf_half tf_f2h(float f) {
  tf_half h; asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h.x) : "f"(f)); return h;
}
__device__ __forceinline__ float tf_b2f(tf_bf16 b) {
  return __uint_as_float(((unsigned int)b.x) << 16);
}
__device__ __forceinline__ tf_bf16 tf_f2b(float f) {
  tf_bf16 b; asm("{ cvt.rn.bf16.f32 %0, %1; }" : "=h"(b.x) : "f"(f)); return b;
}

// 8-bit floats: storage bytes, converted through float in software (sm_80 has no cvt for
// them; sm_89's saturates, where torch and ml-dtypes round past the largest value to NaN
// (e4m3fn) or infinity (e5m2)). From float: round to nearest even.
struct __align__(1) tf_fp8e4m3 { unsigned char x; };
struct __align__(1) tf_fp8e5m2 { unsigned char x; };
__device__ __forceinline__ float tf_e4m3_to_f(tf_fp8e4m3 v) {
  const unsigned int e = (v.x >> 3) & 15u, m = v.x & 7u;
  float f = (e == 15u && m == 7u) ? __int_as_float(0x7fffffff)
          : e == 0u ? (float)m * 0.001953125f  // m * 2^-9
          : __uint_as_float(((e + 120u) << 23) | (m << 20));
  return (v.x & 0x80u) ? -f : f;
}
__device__ __forceinline__ tf_fp8e4m3 tf_f_to_e4m3(float f) {
  const unsigned int bits = __float_as_uint(f), sign = (bits >> 24) & 0x80u, u = bits & 0x7fffffffu;
  unsigned int code;
  if (u >= 0x43f00000u) code = 0x7fu;  // NaN, inf, and what rounds past 448 (from 480 up)
  else if (u < 0x3c800000u) code = __float2uint_rn(__uint_as_float(u) * 512.0f);  // below 2^-6
  else code = ((u + 0x7ffffu + ((u >> 20) & 1u)) >> 20) - (120u << 3);  // 464..480: 0x7f, NaN
  tf_fp8e4m3 r; r.x = (unsigned char)(sign | code); return r;
}
__device__ __forceinline__ float tf_e5m2_to_f(tf_fp8e5m2 v) {
  return tf_h2f(tf_half{(unsigned short)(v.x << 8)});  // the top byte of a half
}
__device__ __forceinline__ tf_fp8e5m2 tf_f_to_e5m2(float f) {
  const unsigned int bits = __float_as_uint(f), sign = (bits >> 24) & 0x80u, u = bits & 0x7fffffffu;
  unsigned int code;
  if (u > 0x7f800000u) code = 0x7fu;  // NaN
  else if (u >= 0x47700000u) code = 0x7cu;  // infinity, and what rounds past 57344 (61440 up)
  else if (u < 0x38800000u) code = __float2uint_rn(__uint_as_float(u) * 65536.0f);  // below 2^-14
  else code = ((u + 0xfffffu + ((u >> 21) & 1u)) >> 21) - (112u << 2);
  tf_fp8e5m2 r; r.x = (unsigned char)(sign | code); return r;
}

template <typename To, typename From> struct TfCast {
  static __device__ __forceinline__ To f(From v) { return static_cast<To>(v); }
};
template <typename From> struct TfCast<tf_half, From> {
  static __device__ __forceinline__ tf_half f(From v) { return tf_f2h(static_cast<float>(v)); }
};
template <typename To> struct TfCast<To, tf_half> {
  static __device__ __forceinline__ To f(tf_half v) { return static_cast<To>(tf_h2f(v)); }
};
template <typename From> struct TfCast<tf_bf16, From> {
  static __device__ __forceinline__ tf_bf16 f(From v) { return tf_f2b(static_cast<float>(v)); }
};
template <typename To> struct TfCast<To, tf_bf16> {
  static __device__ __forceinline__ To f(tf_bf16 v) { return static_cast<To>(tf_b2f(v)); }
};
template <> struct TfCast<tf_half, tf_half> {
  static __device__ __forceinline__ tf_half f(tf_half v) { return v; }
};
template <> struct TfCast<tf_bf16, tf_bf16> {
  static __device__ __forceinline__ tf_bf16 f(tf_bf16 v) { return v; }
};
template <> struct TfCast<tf_half, tf_bf16> {
  static __device__ __forceinline__ tf_half f(tf_bf16 v) { return tf_f2h(tf_b2f(v)); }
};
template <> struct TfCast<tf_bf16, tf_half> {
  static __device__ __forceinline__ tf_bf16 f(tf_half v) { return tf_f2b(tf_h2f(v)); }
};
// To and from the 8-bit floats, through float (every other type's value rounds to float
// first: so do torch's casts).
#define TF_FP8_CASTS(T, TO_F, FROM_F)                                                        \
  template <typename From> struct TfCast<T, From> {                                         \
    static __device__ __forceinline__ T f(From v) { return FROM_F(TfCast<float, From>::f(v)); } \
  };                                                                                        \
  template <typename To> struct TfCast<To, T> {                                             \
    static __device__ __forceinline__ To f(T v) { return TfCast<To, float>::f(TO_F(v)); }   \
  };                                                                                        \
  template <> struct TfCast<T, T> {                                                         \
    static __device__ __forceinline__ T f(T v) { return v; }                                \
  };                                                                                        \
  template <> struct TfCast<T, tf_half> {                                                   \
    static __device__ __forceinline__ T f(tf_half v) { return FROM_F(tf_h2f(v)); }          \
  };                                                                                        \
  template <> struct TfCast<T, tf_bf16> {                                                   \
    static __device__ __forceinline__ T f(tf_bf16 v) { return FROM_F(tf_b2f(v)); }          \
  };                                                                                        \
  template <> struct TfCast<tf_half, T> {                                                   \
    static __device__ __forceinline__ tf_half f(T v) { return tf_f2h(TO_F(v)); }            \
  };                                                                                        \
  template <> struct TfCast<tf_bf16, T> {                                                   \
    static __device__ __forceinline__ tf_bf16 f(T v) { return tf_f2b(TO_F(v)); }            \
  };
TF_FP8_CASTS(tf_fp8e4m3, tf_e4m3_to_f, tf_f_to_e4m3)
TF_FP8_CASTS(tf_fp8e5m2, tf_e5m2_to_f, tf_f_to_e5m2)
template <> struct TfCast<tf_fp8e4m3, tf_fp8e5m2> {
  static __device__ __forceinline__ tf_fp8e4m3 f(tf_fp8e5m2 v) { return tf_f_to_e4m3(tf_e5m2_to_f(v)); }
};
template <> struct TfCast<tf_fp8e5m2, tf_fp8e4m3> {
  static __device__ __forceinline__ tf_fp8e5m2 f(tf_fp8e4m3 v) { return tf_f_to_e5m2(tf_e4m3_to_f(v)); }
};
template <> struct TfCast<bool, tf_half> {
  static __device__ __forceinline__ bool f(tf_half v) { return tf_h2f(v) != 0.0f; }
};
template <> struct TfCast<bool, tf_bf16> {
  static __device__ __forceinline__ bool f(tf_bf16 v) { return tf_b2f(v) != 0.0f; }
};
template <typename To, typename From> __device__ __forceinline__ To tf_cast(From v) {
  return TfCast<To, From>::f(v);
}

#define TF_FLOAT_FN(name, ffn, dfn)                                              \
  __device__ __forceinline__ float name(float x) { return ffn(x); }             \
  __device__ __forceinline__ double name(double x) { return dfn(x); }
TF_FLOAT_FN(tf_exp, expf, exp)
TF_FLOAT_FN(tf_exp2, exp2f, exp2)
TF_FLOAT_FN(tf_log, logf, log)
TF_FLOAT_FN(tf_log2, log2f, log2)
TF_FLOAT_FN(tf_log1p, log1pf, log1p)
TF_FLOAT_FN(tf_expm1, expm1f, expm1)
TF_FLOAT_FN(tf_sqrt, sqrtf, sqrt)
TF_FLOAT_FN(tf_rsqrt, rsqrtf, rsqrt)
TF_FLOAT_FN(tf_sin, sinf, sin)
TF_FLOAT_FN(tf_cos, cosf, cos)
TF_FLOAT_FN(tf_tan, tanf, tan)
TF_FLOAT_FN(tf_tanh, tanhf, tanh)
TF_FLOAT_FN(tf_erf, erff, erf)
TF_FLOAT_FN(tf_erfc, erfcf, erfc)

// Rounding: an integer is already whole (the identity); a float or double rounds.
#define TF_ROUNDING_FN(name, ffn, dfn)                                          \
  template <typename T> __device__ __forceinline__ T name(T x) { return x; }    \
  template <> __device__ __forceinline__ float name(float x) { return ffn(x); } \
  template <> __device__ __forceinline__ double name(double x) { return dfn(x); }
TF_ROUNDING_FN(tf_floor, floorf, floor)
TF_ROUNDING_FN(tf_ceil, ceilf, ceil)
TF_ROUNDING_FN(tf_round, rintf, rint)
TF_ROUNDING_FN(tf_trunc, truncf, trunc)

template <typename T> __device__ __forceinline__ T tf_abs(T x) { return x < T(0) ? -x : x; }
template <> __device__ __forceinline__ float tf_abs(float x) { return fabsf(x); }
template <> __device__ __forceinline__ double tf_abs(double x) { return fabs(x); }
template <typename T> __device__ __forceinline__ T tf_sign(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}
template <typename T> __device__ __forceinline__ T tf_relu(T x) {
  return x > T(0) ? x : (x != x ? x : T(0));
}
template <typename T> __device__ __forceinline__ T tf_sigmoid(T x) { return T(1) / (T(1) + tf_exp(-x)); }
template <typename T> __device__ __forceinline__ T tf_silu(T x) { return x * tf_sigmoid(x); }
template <typename T> __device__ __forceinline__ T tf_gelu(T x) {
  return T(0.5) * x * (T(1) + tf_erf(x * T(0.70710678118654752440)));
}
template <typename T> __device__ __forceinline__ bool tf_isnan(T x) { return x != x; }
template <typename T> __device__ __forceinline__ bool tf_isinf(T x) { return false; }
template <> __device__ __forceinline__ bool tf_isinf(float x) { return isinf(x); }
template <> __device__ __forceinline__ bool tf_isinf(double x) { return isinf(x); }
template <typename T> __device__ __forceinline__ bool tf_isfinite(T x) { return true; }
template <> __device__ __forceinline__ bool tf_isfinite(float x) { return isfinite(x); }
template <> __device__ __forceinline__ bool tf_isfinite(double x) { return isfinite(x); }
template <typename T> __device__ __forceinline__ T tf_bitwise_not(T x) { return ~x; }
template <> __device__ __forceinline__ bool tf_bitwise_not(bool x) { return !x; }

// NaN-propagating max/min, as torch.maximum / numpy.maximum.
template <typename T> __device__ __forceinline__ T tf_max(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
}
template <typename T> __device__ __forceinline__ T tf_min(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
}
template <typename T> __device__ __forceinline__ bool tf_signbit(T x) { return x < T(0); }
template <> __device__ __forceinline__ bool tf_signbit(float x) { return signbit(x); }
template <> __device__ __forceinline__ bool tf_signbit(double x) { return signbit(x); }
// Shifts defined for every amount (elementwise.py's _shift): outside [0, bits) all is shifted out.
template <typename T> __device__ __forceinline__ T tf_shl(T a, T b) {
  return (b < T(0) || b >= T(8 * sizeof(T))) ? T(0) : (T)((unsigned long long)a << b);
}
template <typename T> __device__ __forceinline__ T tf_sar(T a, T b) {
  return (b < T(0) || b >= T(8 * sizeof(T))) ? (a < T(0) ? T(-1) : T(0)) : (T)(a >> b);
}
template <typename T> __device__ __forceinline__ T tf_shr(T a, T b) {
  if (b < T(0) || b >= T(8 * sizeof(T))) return T(0);
  return sizeof(T) == 8 ? (T)((unsigned long long)a >> b) : sizeof(T) == 4 ? (T)((unsigned int)a >> b)
       : sizeof(T) == 2 ? (T)((unsigned short)a >> b) : (T)((unsigned char)a >> b);
}
template <typename T> __device__ __forceinline__ T tf_gcd(T a, T b) {
  a = a < T(0) ? T(0) - a : a; b = b < T(0) ? T(0) - b : b;
  while (b != T(0)) { const T r = a % b; a = b; b = r; }
  return a;
}
__device__ __forceinline__ float tf_nextafter(float a, float b) { return nextafterf(a, b); }
__device__ __forceinline__ double tf_nextafter(double a, double b) { return nextafter(a, b); }
// nvFuser's div: truncating on integers; x / 0 is 0 (as x % 0 below), MIN / -1 wraps to MIN.
template <typename T> __device__ __forceinline__ T tf_div(T a, T b) {
  return b == T(0) ? T(0) : (b == T(-1) ? T(0 - (unsigned long long)a) : a / b);
}
template <> __device__ __forceinline__ float tf_div(float a, float b) { return a / b; }
template <> __device__ __forceinline__ double tf_div(double a, double b) { return a / b; }
template <typename T> __device__ __forceinline__ T tf_fmod(T a, T b) { return b == T(0) ? T(0) : a % b; }
template <> __device__ __forceinline__ float tf_fmod(float a, float b) { return fmodf(a, b); }
template <> __device__ __forceinline__ double tf_fmod(double a, double b) { return fmod(a, b); }
template <typename T> __device__ __forceinline__ T tf_remainder(T a, T b) {
  T r = tf_fmod(a, b);
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
}
template <typename T> __device__ __forceinline__ T tf_pow(T a, T b) {
  T r = 1;
  for (T e = b; e > 0; --e) r *= a;
  return r;
}
template <> __device__ __forceinline__ float tf_pow(float a, float b) { return powf(a, b); }
template <> __device__ __forceinline__ double tf_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float tf_atan2(float a, float b) { return atan2f(a, b); }
__device__ __forceinline__ double tf_atan2(double a, double b) { return atan2(a, b); }

// Philox4x32-10 over (position, offset) keyed by the seed: tunefuse/philox.py is its host copy
// (uniform bit for bit: the rounding of every step is spelled out, never contracted to an FMA).
struct TfPhilox { unsigned int x, y, z, w; };
__device__ __forceinline__ TfPhilox tf_philox(long long position, long long seed, long long offset) {
  unsigned int c0 = (unsigned int)position, c1 = (unsigned int)((unsigned long long)position >> 32);
  unsigned int c2 = (unsigned int)offset, c3 = (unsigned int)((unsigned long long)offset >> 32);
  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)((unsigned long long)seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  TfPhilox r; r.x = c0; r.y = c1; r.z = c2; r.w = c3; return r;
}
__device__ __forceinline__ float tf_unit24(unsigned int w) { return (float)(w >> 8) * 5.9604644775390625e-08f; }
__device__ __forceinline__ double tf_unit53(unsigned int hi, unsigned int lo) {
  return (double)((((unsigned long long)hi) << 21) ^ (lo >> 11)) * 1.1102230246251565e-16;
}
template <typename T> __device__ T tf_uniform(long long p, long long seed, long long offset, T a, T b);
template <> __device__ __forceinline__ float tf_uniform(long long p, long long seed, long long offset, float a, float b) {
  return __fadd_rn(a, __fmul_rn(b - a, tf_unit24(tf_philox(p, seed, offset).x)));
}
template <> __device__ __forceinline__ double tf_uniform(long long p, long long seed, long long offset, double a, double b) {
  const TfPhilox r = tf_philox(p, seed, offset);
  return __dadd_rn(a, __dmul_rn(b - a, tf_unit53(r.x, r.y)));
}
// uniform's [lo, hi) holds in the output's type: a draw that rounds to hi (or above) there is
// the largest value below hi instead (tunefuse/philox.py: below).
__device__ __forceinline__ unsigned short tf_prev16(unsigned short u) {
  return (u & 0x7fffu) == 0 ? (unsigned short)0x8001u : (u & 0x8000u) ? (unsigned short)(u + 1u) : (unsigned short)(u - 1u);
}
template <typename T> __device__ T tf_below(T r, T hi);
template <> __device__ __forceinline__ float tf_below(float r, float hi) {
  return r < hi ? r : nextafterf(hi, __int_as_float(0xff800000));
}
template <> __device__ __forceinline__ double tf_below(double r, double hi) {
  return r < hi ? r : nextafter(hi, __longlong_as_double(0xfff0000000000000ULL));
}
template <> __device__ __forceinline__ tf_half tf_below(tf_half r, tf_half hi) {
  if (tf_cast<float>(r) < tf_cast<float>(hi)) return r;
  tf_half p; p.x = tf_prev16(hi.x); return p;
}
template <> __device__ __forceinline__ tf_bf16 tf_below(tf_bf16 r, tf_bf16 hi) {
  if (tf_cast<float>(r) < tf_cast<float>(hi)) return r;
  tf_bf16 p; p.x = tf_prev16(hi.x); return p;
}
template <typename T> __device__ T tf_normal(long long p, long long seed, long long offset, T mean, T std);
template <> __device__ __forceinline__ float tf_normal(long long p, long long seed, long long offset, float mean, float std) {
  const TfPhilox r = tf_philox(p, seed, offset);
  const float u1 = 1.0f - tf_unit24(r.x), u2 = tf_unit24(r.y);
  return __fadd_rn(mean, __fmul_rn(std, sqrtf(-2.0f * logf(u1)) * cosf(__fmul_rn(6.2831855f, u2))));
}
template <> __device__ __forceinline__ double tf_normal(long long p, long long seed, long long offset, double mean, double std) {
  const TfPhilox r = tf_philox(p, seed, offset);
  const double u1 = 1.0 - tf_unit53(r.x, r.y), u2 = tf_unit53(r.z, r.w);
  return __dadd_rn(mean, __dmul_rn(std, sqrt(-2.0 * log(u1)) * cos(__dmul_rn(6.283185307179586, u2))));
}

// Welford's running (mean, m2, count), merged across threads.
template <typename T> struct TfWelford { T mean; T m2; T n; };
// A Welford step divides once an element: in fp32 the fast division (2 ulp, where the IEEE
// one is a dozen instructions) keeps an outer var_mean bound by memory, not by the divider.
__device__ __forceinline__ float tf_welford_div(float a, float b) { return __fdividef(a, b); }
__device__ __forceinline__ double tf_welford_div(double a, double b) { return a / b; }
template <typename T> __device__ __forceinline__ void tf_welford_add(TfWelford<T>& w, T x) {
  w.n += T(1);
  T d = x - w.mean;
  w.mean += tf_welford_div(d, w.n);
  w.m2 += d * (x - w.mean);
}
// K elements (xs[k * S]) merged into w at once (Chan et al.): the chunk's mean (each element
// scaled by 1/K before the sum, so the sum cannot overflow where the elements do not) and its
// squared deviations from it, in registers and without a division; then one merge, whose
// factor f = K / (n + K) the caller computes once for every output that has seen n elements.
template <typename T, int K, int S> __device__ __forceinline__ void tf_welford_add_chunk(TfWelford<T>& w, const T* xs, T n, T f) {
  const T inv = T(1) / T(K);
  T m = xs[0] * inv;
#pragma unroll
  for (int k = 1; k < K; ++k) m = fma(xs[k * S], inv, m);
  T q = T(0);
#pragma unroll
  for (int k = 0; k < K; ++k) { const T e = xs[k * S] - m; q = fma(e, e, q); }
  const T d = m - w.mean;
  w.mean = fma(d, f, w.mean);
  w.m2 += q + d * d * (n * f);
  w.n = n + T(K);
}
template <typename T> __device__ __forceinline__ TfWelford<T> tf_welford_merge(TfWelford<T> a, TfWelford<T> b) {
  if (b.n == T(0)) return a;
  if (a.n == T(0)) return b;
  T n = a.n + b.n;
  T d = b.mean - a.mean;
  T f = tf_welford_div(b.n, n);
  TfWelford<T> r;
  r.n = n;
  r.mean = a.mean + d * f;
  r.m2 = a.m2 + b.m2 + d * d * (a.n * f);
  return r;
}

// A row's max and its sum of exp(x - max) in one pass (softmax, logsumexp): the sum is kept
// relative to the running max and rescaled when the max grows, one exp an element. A row of
// -inf elements adds garbage ones that the first finite element scales by exp(-inf) = 0; a
// row whose max is not finite is settled at the end (tf_max_exp_sum_total). The max is
// tf_max's, so it is the very value a max of its own would be.
template <typename T> struct TfMaxExpSum { T max; T sum; };
// The terms of a sum of exp(x - max) in fp32 are the fast exps: ex2.approx of x * log2(e), a
// few ulp where expf is a dozen instructions (summed, the error is the size of the summation
// order's), flushed to zero below 2^-126 (a term that small is lost in a sum of at least 1;
// without .ftz the instruction is wrapped in a denormal fix-up). A bf16 row is read faster
// than expf keeps up with (7 elements a clock an SM on an H100).
__device__ __forceinline__ float tf_exp_sum_term(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}
__device__ __forceinline__ double tf_exp_sum_term(double x) { return exp(x); }
template <typename T> __device__ __forceinline__ void tf_max_exp_sum_add(TfMaxExpSum<T>& w, T x) {
  const bool grows = x > w.max;
  const T e = (x == w.max) ? T(1) : tf_exp_sum_term(grows ? w.max - x : x - w.max);
  w.sum = grows ? w.sum * e + T(1) : w.sum + e;
  w.max = tf_max<T>(w.max, x);
}
template <typename T> __device__ __forceinline__ TfMaxExpSum<T> tf_max_exp_sum_merge(TfMaxExpSum<T> a, TfMaxExpSum<T> b) {
  TfMaxExpSum<T> r;
  r.max = tf_max<T>(a.max, b.max);
  r.sum = (a.max == r.max ? a.sum : a.sum * tf_exp_sum_term(a.max - r.max)) +
          (b.max == r.max ? b.sum : b.sum * tf_exp_sum_term(b.max - r.max));
  return r;
}
// N elements at once: the running max moved to theirs first, then N + 1 exps that do not
// wait on one another (element by element, each exp waits for the max the last one left).
template <typename T, int N> __device__ __forceinline__ void tf_max_exp_sum_add_chunk(TfMaxExpSum<T>& w, const T (&x)[N]) {
  T m = w.max;
  #pragma unroll
  for (int i = 0; i < N; ++i) m = tf_max<T>(m, x[i]);
  T s = (w.max == m) ? w.sum : w.sum * tf_exp_sum_term(w.max - m);
  #pragma unroll
  for (int i = 0; i < N; ++i) s += (x[i] == m) ? T(1) : tf_exp_sum_term(x[i] - m);
  w.max = m;
  w.sum = s;
}
// The sum of exp(x - max) over the row: where the max is -inf, +inf or NaN the two-pass form
// meets exp(-inf - -inf), exp(inf - inf) or exp(NaN) and is NaN; so is this (an empty row: 0).
template <typename T> __device__ __forceinline__ T tf_max_exp_sum_total(TfMaxExpSum<T> w, long long n) {
  return (n == 0 || tf_isfinite(w.max)) ? w.sum : T(__int_as_float(0x7fffffff));
}

// n / d for 0 <= n < 2**31 by d's fast divisor f = (shift << 32) | magic (codegen.expr's
// fast_divisor, computed on the host): a multiply-high, an add and a shift.
__device__ __forceinline__ int tf_fast_div(int n, long long f) {
  const unsigned int t = __umulhi((unsigned int)n, (unsigned int)f);
  return (int)((t + (unsigned int)n) >> (unsigned int)(f >> 32));
}

template <typename T, int N> struct __align__(sizeof(T) * N) TfVec { T v[N]; };

// Lane v of a vector of bfloat16 as a float, read from the 32-bit word holding it: the high
// half is the word masked (one instruction), where the half taken alone cost an extract
// and a shift.
template <int N> __device__ __forceinline__ float tf_b2f_lane(const TfVec<tf_bf16, N>& x, int v) {
  static_assert(N % 2 == 0, "a vector of whole 32-bit words");
  union { TfVec<tf_bf16, N> x; unsigned int w[N / 2]; } bits;
  bits.x = x;
  const unsigned int w = bits.w[v >> 1];
  return __uint_as_float((v & 1) ? (w & 0xffff0000u) : (w << 16));
}

// Data read once (no broadcast, one pass over it) is loaded evict-first (ld.global.cs), so
// that it does not push out of L2 the lines other loads will want again.
template <typename T, typename U> __device__ __forceinline__ T tf_ld_stream_as(const T* p) {
  union { U u; T t; } bits;
  bits.u = __ldcs(reinterpret_cast<const U*>(p));
  return bits.t;
}
template <typename T> __device__ __forceinline__ T tf_ld_stream(const T* p) {
  if constexpr (sizeof(T) == 16) return tf_ld_stream_as<T, uint4>(p);
  else if constexpr (sizeof(T) == 8) return tf_ld_stream_as<T, uint2>(p);
  else if constexpr (sizeof(T) == 4) return tf_ld_stream_as<T, unsigned int>(p);
  else if constexpr (sizeof(T) == 2) return tf_ld_stream_as<T, unsigned short>(p);
  else return tf_ld_stream_as<T, unsigned char>(p);
}
// Data written once and not read again by the kernel is stored evict-first (st.global.cs).
template <typename T, typename U> __device__ __forceinline__ void tf_st_stream_as(T* p, T v) {
  union { U u; T t; } bits;
  bits.t = v;
  __stcs(reinterpret_cast<U*>(p), bits.u);
}
template <typename T> __device__ __forceinline__ void tf_st_stream(T* p, T v) {
  if constexpr (sizeof(T) == 16) tf_st_stream_as<T, uint4>(p, v);
  else if constexpr (sizeof(T) == 8) tf_st_stream_as<T, uint2>(p, v);
  else if constexpr (sizeof(T) == 4) tf_st_stream_as<T, unsigned int>(p, v);
  else if constexpr (sizeof(T) == 2) tf_st_stream_as<T, unsigned short>(p, v);
  else tf_st_stream_as<T, unsigned char>(p, v);
}
// A row split over a thread-block cluster (sm_90): the cluster's blocks wait for one another
// (arrive with release, wait with acquire: what a block wrote to its shared memory before is
// visible to the others after), and a block reads another's shared memory through the
// generic address `mapa` gives for that rank (distributed shared memory).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void tf_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ unsigned int tf_cluster_rank() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
template <typename T> __device__ __forceinline__ const T* tf_cluster_map(const T* p, unsigned int rank) {
  unsigned long long out;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
  return reinterpret_cast<const T*>(out);
}
#endif
// ---- end of preamble ---------------------------------------------------------------
"""
