/* adjoint-array: the prelude of every generated CUDA module.
 *
 * It holds the shared rule table (adjoint_core::rules) in C: for each unary primitive a
 * function giving f(x), f'(x) and f''(x), for each binary primitive f(x, y) and its first and
 * second partials, written operation for operation as rules.rs writes them. The same text
 * compiles as CUDA C (NVRTC) and as plain C99 (the code-generation tests compile the generated
 * kernels with the host's C compiler and run every thread in a loop), so the kernels the GPU
 * runs are the kernels the tests check. Kernels use no floating-point atomics: each thread
 * writes only its own element's results, each sum in a fixed order, which is what makes them
 * deterministic. All but one use no shared memory and no barriers, which lets a loop over the
 * threads emulate them; the exception, the executor's tiled matrix product, is written so that
 * one thread doing every thread's work in turn computes the same thing (ADJ_THREADS is 1 there
 * and ADJ_SYNC nothing), and the emulation runs it that way, block by block.
 */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ADJ_DEV __device__ static __forceinline__
#define ADJ_KERNEL extern "C" __global__ void
#define ADJ_ELEMENT \
  ((unsigned long long)blockIdx.x * (unsigned long long)blockDim.x + (unsigned long long)threadIdx.x)
/* block-level kernels (the tiled matrix product): the block, the thread in it, the threads */
#define ADJ_BLOCK ((unsigned long long)blockIdx.x)
#define ADJ_THREAD ((unsigned)threadIdx.x)
#define ADJ_THREADS ((unsigned)blockDim.x)
#define ADJ_SYNC() __syncthreads()
#define ADJ_SHARED __shared__
/* the smallest element whose index was out of bounds (an integer minimum: deterministic) */
#define ADJ_BAD(flag, e) atomicMin((flag), (e))
ADJ_DEV double adj_bits(unsigned long long b) { return __longlong_as_double((long long)b); }
#else
#include <math.h>
#include <string.h>
/* NVRTC defines none of C's floating-point macros: neither may the emulation (ADJ_NAN, ADJ_INF) */
#undef NAN
#undef INFINITY
#undef HUGE_VAL
#define ADJ_DEV static inline
#define ADJ_KERNEL void
static unsigned long long adj_element;
#define ADJ_ELEMENT adj_element
/* a block-level kernel runs as one thread doing every thread's work, block by block */
#define ADJ_BLOCK adj_element
#define ADJ_THREAD 0u
#define ADJ_THREADS 1u
#define ADJ_SYNC() ((void)0)
#define ADJ_SHARED static
#define ADJ_BAD(flag, e) \
  do {                   \
    if (*(flag) > (e)) { \
      *(flag) = (e);     \
    }                    \
  } while (0)
ADJ_DEV double adj_bits(unsigned long long b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}
#endif

#define ADJ_LN_2 0.693147180559945309417232121458176568
#define ADJ_LN_10 2.30258509299404568401799145468436421
#define ADJ_PI 3.14159265358979323846264338327950288
#define ADJ_FRAC_2_SQRT_PI 1.12837916709551257389615890312154517
#define ADJ_INF adj_bits(0x7ff0000000000000ULL)
#define ADJ_NAN adj_bits(0x7ff8000000000000ULL)

/* x^n by repeated squaring, as compiler-rt's __powidf2 (what Rust's powi calls) */
ADJ_DEV double adj_powi(double a, int b) {
  int recip = b < 0;
  double r = 1.0;
  for (;;) {
    if (b & 1) r *= a;
    b /= 2;
    if (b == 0) break;
    a *= a;
  }
  return recip ? 1.0 / r : r;
}

/* adjoint_core::special::polygamma, step for step */
ADJ_DEV double adj_factorial(unsigned n) {
  double f = 1.0;
  for (unsigned i = 1; i <= n; i++) f *= (double)i;
  return f;
}
ADJ_DEV double adj_polygamma_asymptotic(unsigned n, double x) {
  const double bern[9] = {1.0 / 6.0,     -1.0 / 30.0,   1.0 / 42.0,
                          -1.0 / 30.0,   5.0 / 66.0,    -691.0 / 2730.0,
                          7.0 / 6.0,     -3617.0 / 510.0, 43867.0 / 798.0};
  double inv2 = 1.0 / (x * x);
  if (n == 0) {
    double sum = 0.0, pow_ = inv2;
    for (int k = 0; k < 9; k++) {
      double two_k = 2.0 * ((double)k + 1.0);
      sum += bern[k] / two_k * pow_;
      pow_ *= inv2;
    }
    return log(x) - 0.5 / x - sum;
  }
  double nf = (double)n;
  double xn = adj_powi(x, (int)n);
  double sum = adj_factorial(n - 1) / xn + adj_factorial(n) / (2.0 * xn * x);
  double ratio = adj_factorial(n - 1) * (nf) * (nf + 1.0) / 2.0;
  double pow_ = inv2 / xn;
  for (int kk = 0; kk < 9; kk++) {
    double k = (double)kk + 1.0;
    sum += bern[kk] * ratio * pow_;
    ratio *= (2.0 * k + nf) * (2.0 * k + nf + 1.0) / ((2.0 * k + 1.0) * (2.0 * k + 2.0));
    pow_ *= inv2;
  }
  return n % 2 == 1 ? sum : -sum;
}
/* the n-th derivative of cot y as a polynomial in c = cot y (n <= 32) */
ADJ_DEV double adj_cot_derivative(unsigned n, double c) {
  double p[34], q[34];
  for (int j = 0; j < 34; j++) p[j] = 0.0;
  p[1] = 1.0;
  for (unsigned k = 0; k < n; k++) {
    for (int j = 0; j < 34; j++) q[j] = 0.0;
    for (unsigned j = 0; j <= k; j++) {
      double d = (double)(j + 1) * p[j + 1];
      q[j] -= d;
      q[j + 2] -= d;
    }
    for (int j = 0; j < 34; j++) p[j] = q[j];
  }
  double acc = 0.0;
  for (int j = (int)n + 1; j >= 0; j--) acc = acc * c + p[j];
  return acc;
}
/* psi^(n)(x) for x > 0 (or n > 32): the recurrence up to the asymptotic series */
ADJ_DEV double adj_polygamma_shifted(unsigned n, double x) {
  double nfact = adj_factorial(n);
  double sign_n = n % 2 == 0 ? 1.0 : -1.0;
  double shift = 16.0 + 2.0 * (double)n;
  double acc = 0.0;
  while (x < shift) {
    acc -= sign_n * nfact / adj_powi(x, (int)n + 1);
    x += 1.0;
  }
  return acc + adj_polygamma_asymptotic(n, x);
}
ADJ_DEV double adj_polygamma(unsigned n, double x) {
  if (x != x) return ADJ_NAN;
  if (x <= 0.0 && x == floor(x)) return n % 2 == 1 ? ADJ_INF : ADJ_NAN;
  if (x == ADJ_INF) return n == 0 ? ADJ_INF : 0.0;
  if (x < 0.0 && n <= 32) {
    /* reflection: psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)), the cotangent
       at x - round(x) (exact; period 1); 1 - x > 1 */
    double c = 1.0 / tan(ADJ_PI * (x - round(x)));
    double sign_n = n % 2 == 0 ? 1.0 : -1.0;
    return sign_n * adj_polygamma_shifted(n, 1.0 - x) -
           adj_powi(ADJ_PI, (int)n + 1) * adj_cot_derivative(n, c);
  }
  return adj_polygamma_shifted(n, x);
}

/* ---- unary rules: value, first and second derivative (rules::unary) ---- */
#define ADJ_R1(V, D, DD) \
  do {                   \
    *v = (V);            \
    *d = (D);            \
    *dd = (DD);          \
  } while (0)
ADJ_DEV void adj_u_neg(double x, double *v, double *d, double *dd) { ADJ_R1(-x, -1.0, 0.0); }
ADJ_DEV void adj_u_recip(double x, double *v, double *d, double *dd) {
  double r = 1.0 / x;
  ADJ_R1(r, -(r * r), r * r * r * 2.0);
}
ADJ_DEV void adj_u_sqrt(double x, double *v, double *d, double *dd) {
  double r = sqrt(x);
  /* + 0: at x = -0 the partials at +0 (+inf), as in rules.rs */
  double q = 1.0 / ((r + 0.0) * 2.0);
  ADJ_R1(r, q, -(q / ((x + 0.0) * 2.0)));
}
ADJ_DEV void adj_u_cbrt(double x, double *v, double *d, double *dd) {
  double r = cbrt(x);
  double q = 1.0 / (r * r * 3.0);
  ADJ_R1(r, q, -(q * 2.0 / (x * 3.0)));
}
ADJ_DEV void adj_u_powi(int n, double x, double *v, double *d, double *dd) {
  if (n == 0) {
    ADJ_R1(1.0, 0.0, 0.0);
  } else if (n == 1) {
    ADJ_R1(x, 1.0, 0.0);
  } else {
    /* each power by adj_powi itself, as in rules.rs (n - 1 and n - 2 without overflow) */
    double nf = (double)n;
    double pm1 = n > -2147483647 - 1 ? adj_powi(x, n - 1) : adj_powi(x, n) / x;
    double pm2 = n > -2147483647 ? adj_powi(x, n - 2) : pm1 / x;
    ADJ_R1(adj_powi(x, n), pm1 * nf, pm2 * (nf * (nf - 1.0)));
  }
}
ADJ_DEV void adj_u_exp(double x, double *v, double *d, double *dd) {
  double r = exp(x);
  ADJ_R1(r, r, r);
}
ADJ_DEV void adj_u_exp2(double x, double *v, double *d, double *dd) {
  double r = exp2(x);
  ADJ_R1(r, r * ADJ_LN_2, r * (ADJ_LN_2 * ADJ_LN_2));
}
ADJ_DEV void adj_u_expm1(double x, double *v, double *d, double *dd) {
  double e = exp(x);
  ADJ_R1(expm1(x), e, e);
}
ADJ_DEV void adj_u_ln(double x, double *v, double *d, double *dd) {
  double q = 1.0 / x;
  ADJ_R1(log(x), q, -(q * q));
}
ADJ_DEV void adj_u_ln1p(double x, double *v, double *d, double *dd) {
  double q = 1.0 / (x + 1.0);
  ADJ_R1(log1p(x), q, -(q * q));
}
ADJ_DEV void adj_u_log2(double x, double *v, double *d, double *dd) {
  double q = 1.0 / (x * ADJ_LN_2);
  ADJ_R1(log2(x), q, -(q / x));
}
ADJ_DEV void adj_u_log10(double x, double *v, double *d, double *dd) {
  /* formed so that neither step overflows, as in rules.rs */
  double q = fabs(x) < 1.0 ? 1.0 / (x * ADJ_LN_10) : 1.0 / x / ADJ_LN_10;
  ADJ_R1(log10(x), q, -(q / x));
}
ADJ_DEV void adj_u_sin(double x, double *v, double *d, double *dd) {
  double s = sin(x), c = cos(x);
  ADJ_R1(s, c, -s);
}
ADJ_DEV void adj_u_cos(double x, double *v, double *d, double *dd) {
  double s = sin(x), c = cos(x);
  ADJ_R1(c, -s, -c);
}
ADJ_DEV void adj_u_tan(double x, double *v, double *d, double *dd) {
  double t = tan(x);
  double q = t * t + 1.0;
  ADJ_R1(t, q, t * q * 2.0);
}
/* 1 - x^2: (1 - x)(1 + x) from |x| = 1/2 on (1 - x * x is inexact near +-1), 1 - x * x below,
   as rules.rs's one_minus_square */
ADJ_DEV double adj_one_minus_square(double x) {
  return fabs(x) < 0.5 ? 1.0 - x * x : (1.0 - x) * (x + 1.0);
}
ADJ_DEV void adj_u_asin(double x, double *v, double *d, double *dd) {
  double q = 1.0 / sqrt(adj_one_minus_square(x));
  ADJ_R1(asin(x), q, x * q * q * q);
}
ADJ_DEV void adj_u_acos(double x, double *v, double *d, double *dd) {
  double q = 1.0 / sqrt(adj_one_minus_square(x));
  ADJ_R1(acos(x), -q, -(x * q * q * q));
}
ADJ_DEV void adj_u_atan(double x, double *v, double *d, double *dd) {
  /* (1/x)² beyond |x| = 2^27, where x² + 1 rounds to x², as in rules.rs */
  double r = 1.0 / x;
  double q = fabs(x) >= 134217728.0 ? r * r : 1.0 / (x * x + 1.0);
  /* the second partial 0 at +-inf where the first is 0, not inf * 0, as in rules.rs */
  ADJ_R1(atan(x), q, isinf(x) && q == 0.0 ? 0.0 : -(x * q * q * 2.0));
}
ADJ_DEV void adj_u_sinh(double x, double *v, double *d, double *dd) {
  ADJ_R1(sinh(x), cosh(x), sinh(x));
}
ADJ_DEV void adj_u_cosh(double x, double *v, double *d, double *dd) {
  ADJ_R1(cosh(x), sinh(x), cosh(x));
}
ADJ_DEV void adj_u_tanh(double x, double *v, double *d, double *dd) {
  double t = tanh(x);
  double q = 1.0 - t * t;
  ADJ_R1(t, q, -(t * q * 2.0));
}
ADJ_DEV void adj_u_asinh(double x, double *v, double *d, double *dd) {
  /* hypot, not x * x + 1 (which overflows), as in rules.rs */
  double q = 1.0 / hypot(x, 1.0);
  ADJ_R1(asinh(x), q, isinf(x) && q == 0.0 ? 0.0 : -(x * q * q * q));
}
ADJ_DEV void adj_u_acosh(double x, double *v, double *d, double *dd) {
  /* a product of two roots, not x * x - 1 (which overflows), as in rules.rs */
  double q = 1.0 / (sqrt(x - 1.0) * sqrt(x + 1.0));
  ADJ_R1(acosh(x), q, isinf(x) && q == 0.0 ? 0.0 : -(x * q * q * q));
}
ADJ_DEV void adj_u_atanh(double x, double *v, double *d, double *dd) {
  double q = 1.0 / adj_one_minus_square(x);
  ADJ_R1(atanh(x), q, x * q * q * 2.0);
}
ADJ_DEV void adj_u_abs(double x, double *v, double *d, double *dd) {
  /* the sign; NaN propagates */
  double s = x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x == 0.0 ? 0.0 : x;
  ADJ_R1(fabs(x), s, 0.0);
}
ADJ_DEV void adj_u_erf(double x, double *v, double *d, double *dd) {
  double q = exp(-(x * x)) * ADJ_FRAC_2_SQRT_PI;
  ADJ_R1(erf(x), q, isinf(x) && q == 0.0 ? 0.0 : -(x * q * 2.0));
}
ADJ_DEV void adj_u_lgamma(double x, double *v, double *d, double *dd) {
  ADJ_R1(lgamma(x), adj_polygamma(0, x), adj_polygamma(1, x));
}
ADJ_DEV void adj_u_polygamma(unsigned n, double x, double *v, double *d, double *dd) {
  ADJ_R1(adj_polygamma(n, x), adj_polygamma(n + 1, x), adj_polygamma(n + 2, x));
}

/* ---- binary rules: value, dx, dy, dxx, dxy, dyy (rules::binary) ---- */
#define ADJ_R2(V, DX, DY, DXX, DXY, DYY) \
  do {                                   \
    *v = (V);                            \
    *dx = (DX);                          \
    *dy = (DY);                          \
    *dxx = (DXX);                        \
    *dxy = (DXY);                        \
    *dyy = (DYY);                        \
  } while (0)
#define ADJ_B_ARGS double x, double y, double *v, double *dx, double *dy, double *dxx, double *dxy, double *dyy
ADJ_DEV void adj_b_add(ADJ_B_ARGS) { ADJ_R2(x + y, 1.0, 1.0, 0.0, 0.0, 0.0); }
ADJ_DEV void adj_b_sub(ADJ_B_ARGS) { ADJ_R2(x - y, 1.0, -1.0, 0.0, 0.0, 0.0); }
ADJ_DEV void adj_b_mul(ADJ_B_ARGS) { ADJ_R2(x * y, y, x, 0.0, 1.0, 0.0); }
ADJ_DEV void adj_b_div(ADJ_B_ARGS) {
  /* the value is x / y, not x * (1 / y), as in rules.rs */
  double inv = 1.0 / y;
  double q = x / y;
  if (isinf(inv)) {
    /* 1/y overflows: q / y, not q * inv (0 * inf = NaN at x = 0), as in rules.rs */
    double w = q / y;
    ADJ_R2(q, inv, -w, 0.0, -(inv * inv), w / y * 2.0);
  } else {
    ADJ_R2(q, inv, -(q * inv), 0.0, -(inv * inv), q * inv * inv * 2.0);
  }
}
ADJ_DEV void adj_b_powf(ADJ_B_ARGS) {
  double p = pow(x, y);
  double pm1 = pow(x, y - 1.0);
  double pm2 = pow(x, y - 2.0);
  double px = y * pm1;
  double pxx = y * (y - 1.0) * pm2;
  /* 0 · ∞ at y = 0 (and y = 1 for the second partial) where x^(y−1) (x^(y−2)) overflows:
     x^y is constant (linear) there, the partial is 0, as in rules.rs */
  if (y == 0.0 && !isfinite(pm1)) px = 0.0;
  else if (x > 0.0 && isfinite(x) && fabs(p) >= 2.2250738585072014e-308 && isfinite(p) &&
           (!isfinite(pm1) || (!isfinite(pm2) && x >= 2.2250738585072014e-308)))
    px = y * p / x; /* as rules.rs's split_power */
  if ((y == 0.0 || y == 1.0) && !isfinite(pm2)) pxx = 0.0;
  else if (!isfinite(pm2) && isfinite(pm1) && x > 0.0 && isfinite(x)) pxx = y * (y - 1.0) * pm1 / x;
  /* y (y − 1) overflows where x^(y−2) underflows: 0, not inf * 0, as in rules.rs */
  else if (pm2 == 0.0 && !isfinite(y * (y - 1.0))) pxx = 0.0;
  if (x == 0.0) {
    ADJ_R2(p, px, 0.0, pxx, 0.0, 0.0);
  } else if (x < 0.0) {
    /* no derivative in y (x^y is real only at integer y), as in rules.rs */
    ADJ_R2(p, px, 0.0, pxx, 0.0, 0.0);
  } else {
    double l = log(x);
    /* x^y underflows where x^(y−1) does not: x^(y−1) · (x · ln x), as in rules.rs */
    double pl = (fabs(p) < 2.2250738585072014e-308 && isfinite(pm1) && x < 1.0) ? pm1 * (x * l) : p * l;
    ADJ_R2(p, px, pl, pxx, pm1 * (y * l + 1.0), pl * l);
  }
}
ADJ_DEV void adj_b_atan2(ADJ_B_ARGS) {
  /* from h = hypot(x, y) and the unit vector (x, y) / h, as in rules.rs */
  double h = hypot(x, y);
  if (h == 0.0) {
    ADJ_R2(atan2(x, y), 0.0, 0.0, 0.0, 0.0, 0.0);
    return;
  }
  if (isinf(h)) {
    /* every partial a multiple of 1/h: 0 (an infinite argument made inf/inf), as in rules.rs */
    ADJ_R2(atan2(x, y), 0.0, 0.0, 0.0, 0.0, 0.0);
    return;
  }
  double ux = x / h, uy = y / h;
  double sx = ux / h, sy = uy / h;
  double sxy2 = sx * sy * 2.0;
  ADJ_R2(atan2(x, y), sy, -sx, -sxy2, (ux * ux - uy * uy) / h / h, sxy2);
}
/* the partials of max and min at a tie are 1/2 each; a NaN operand loses */
ADJ_DEV void adj_minmax(int is_max, ADJ_B_ARGS) {
  int take_x = is_max ? x > y : x < y;
  int take_y = is_max ? x < y : x > y;
  double px, py;
  if (take_x) {
    px = 1.0, py = 0.0;
  } else if (take_y) {
    px = 0.0, py = 1.0;
  } else if (x == y) {
    px = 0.5, py = 0.5;
  } else if (x != x) {
    px = 0.0, py = 1.0;
  } else {
    px = 1.0, py = 0.0;
  }
  ADJ_R2(is_max ? fmax(x, y) : fmin(x, y), px, py, 0.0, 0.0, 0.0);
}
ADJ_DEV void adj_b_max(ADJ_B_ARGS) { adj_minmax(1, x, y, v, dx, dy, dxx, dxy, dyy); }
ADJ_DEV void adj_b_min(ADJ_B_ARGS) { adj_minmax(0, x, y, v, dx, dy, dxx, dxy, dyy); }
ADJ_DEV void adj_b_hypot(ADJ_B_ARGS) {
  double h = hypot(x, y);
  if (h == 0.0) {
    ADJ_R2(h, 0.0, 0.0, 0.0, 0.0, 0.0);
    return;
  }
  if (isinf(h) && !(isinf(x) && isinf(y))) {
    /* the unit vector's limit: an infinite argument is +-1 of it, a finite one beside it 0;
       finite arguments past the range scaled by the larger first; second partials 0 (as in
       rules.rs) */
    double a, b;
    if (isinf(x)) {
      a = copysign(1.0, x), b = 0.0;
    } else if (isinf(y)) {
      a = 0.0, b = copysign(1.0, y);
    } else {
      double m = fmax(fabs(x), fabs(y));
      a = x / m, b = y / m;
    }
    double n = hypot(a, b);
    ADJ_R2(h, a / n, b / n, 0.0, 0.0, 0.0);
    return;
  }
  /* the unit vector as (1, t) / sqrt(1 + t^2), t the smaller argument over the larger, signs
     kept, as in rules.rs */
  double ux, uy;
  if (fabs(x) >= fabs(y)) {
    double t = y / x, s = sqrt(t * t + 1.0), g = copysign(1.0, x);
    ux = g / s, uy = g * t / s;
  } else {
    double t = x / y, s = sqrt(t * t + 1.0), g = copysign(1.0, y);
    ux = g * t / s, uy = g / s;
  }
  ADJ_R2(h, ux, uy, uy * uy / h, -(ux * uy) / h, ux * ux / h);
}
ADJ_DEV void adj_b_rem(ADJ_B_ARGS) {
  /* fmod, with the integer it took off as -dy (0 where y is infinite), as in rules.rs */
  double r = fmod(x, y);
  if (r != r) {
    /* outside the domain (x % 0, inf % y): value and partials NaN, as in rules.rs */
    ADJ_R2(r, ADJ_NAN, ADJ_NAN, ADJ_NAN, ADJ_NAN, ADJ_NAN);
    return;
  }
  double q = isinf(y) ? 0.0 : round((x - r) / y);
  if (q > 1.7976931348623157e308) q = 1.7976931348623157e308;
  if (q < -1.7976931348623157e308) q = -1.7976931348623157e308;
  ADJ_R2(r, 1.0, -q, 0.0, 0.0, 0.0);
}

/* the adjoint product: +0 where the adjoint is zero (even when the partial is not finite: a
 * branch not taken), else g * d */
ADJ_DEV double adj_adjmul(double g, double d) { return g != 0.0 ? g * d : 0.0; }
