/* adjoint-array: the fixed kernels of the CUDA backend's executor (`run.rs`), appended to the
 * prelude. Like the generated kernels, each thread computes one element of its output in a
 * fixed order, with no shared memory, barriers or floating-point atomics: results are the same
 * on every run, and the tests run these kernels as C with a loop over the threads.
 */

/* a[e] += b[e] */
ADJ_KERNEL adj_add(unsigned long long n, double* a, const double* b) {
  const unsigned long long e = ADJ_ELEMENT;
  if (e >= n) return;
  a[e] += b[e];
}

/* a[e] += b[e / inner]: a broadcast adjoint (one value per row) added to a dense one */
ADJ_KERNEL adj_add_bc(unsigned long long n, unsigned long long inner, double* a, const double* b) {
  const unsigned long long e = ADJ_ELEMENT;
  if (e >= n) return;
  a[e] += b[e / inner];
}

/* c = A B for strided views: c[i, j] = sum over k, in order, of a[i·ars + k·acs] · b[k·brs + j·bcs];
 * n = rows · cols of c */
ADJ_KERNEL adj_matmul(unsigned long long n, unsigned long long cols, unsigned long long inner,
                      const double* a, unsigned long long ars, unsigned long long acs,
                      const double* b, unsigned long long brs, unsigned long long bcs, double* c) {
  const unsigned long long e = ADJ_ELEMENT;
  if (e >= n) return;
  const unsigned long long i = e / cols, j = e % cols;
  double s = 0.0;
  for (unsigned long long k = 0; k < inner; k++) s += a[i * ars + k * acs] * b[k * brs + j * bcs];
  c[e] = s;
}

/* Contributions that land on distinct elements, each added where it lands:
 * out[idx[x]] += cv[x] (idx[x] < 0: nowhere). Deterministic because no two threads share an
 * element (the caller checked: `direct_offsets`). */
ADJ_KERNEL adj_scatter_direct(unsigned long long n, const double* cv, const long long* idx, double* out) {
  const unsigned long long x = ADJ_ELEMENT;
  if (x >= n) return;
  const long long t = idx[x];
  if (t >= 0) out[t] += cv[x];
}

/* Split inner loops (matrix products and combining kernels with long sums) compute partial
 * sums part-major, part p of output t at part[p·m + t]; this adds them, in part order:
 * out[t] += Σ_p part[p·m + t], n = m */
ADJ_KERNEL adj_add_parts(unsigned long long n, unsigned long long parts, const double* part, double* out) {
  const unsigned long long t = ADJ_ELEMENT;
  if (t >= n) return;
  double s = 0.0;
  for (unsigned long long p = 0; p < parts; p++) s += part[p * n + t];
  out[t] += s;
}

/* adj_matmul with the inner dimension in `parts` parts of `chunk`: thread e computes part
 * e / (rows·cols) of output e % (rows·cols) into part[e] (then adj_add_parts);
 * n = rows · cols · parts */
ADJ_KERNEL adj_matmul_parts(unsigned long long n, unsigned long long cols, unsigned long long inner,
                            unsigned long long outs, unsigned long long chunk,
                            const double* a, unsigned long long ars, unsigned long long acs,
                            const double* b, unsigned long long brs, unsigned long long bcs, double* part) {
  const unsigned long long e = ADJ_ELEMENT;
  if (e >= n) return;
  const unsigned long long p = e / outs, o = e % outs;
  const unsigned long long i = o / cols, j = o % cols;
  const unsigned long long lo = p * chunk, hi = lo + chunk < inner ? lo + chunk : inner;
  double s = 0.0;
  for (unsigned long long k = lo; k < hi; k++) s += a[i * ars + k * acs] * b[k * brs + j * bcs];
  part[e] = s;
}

/* Row folds. Thread e folds part e % parts of row e / parts: elements
 * [p·chunk, min((p + 1)·chunk, inner)) of the row, left to right, starting from the first; a
 * second launch over the parts (inner = parts, parts = 1) finishes rows split into parts. */
#define ADJ_FOLD(name, combine)                                                                \
  ADJ_KERNEL name(unsigned long long n, unsigned long long inner, unsigned long long parts,    \
                  unsigned long long chunk, const double* x, double* out) {                    \
    const unsigned long long e = ADJ_ELEMENT;                                                  \
    if (e >= n) return;                                                                        \
    const unsigned long long r = e / parts, p = e % parts;                                     \
    const unsigned long long lo = p * chunk;                                                   \
    const unsigned long long hi = lo + chunk < inner ? lo + chunk : inner;                     \
    const double* row = x + r * inner;                                                        \
    double acc = row[lo];                                                                      \
    for (unsigned long long j = lo + 1; j < hi; j++) {                                         \
      const double y = row[j];                                                                 \
      combine;                                                                                 \
    }                                                                                          \
    out[e] = acc;                                                                              \
  }
ADJ_FOLD(adj_fold_add, acc = acc + y)
ADJ_FOLD(adj_fold_mul, acc = acc * y)
/* the values of the rule table's max and min (NaN and signed-zero handling included) */
ADJ_DEV double adj_max_value(double x, double y) {
  double v, a, b, c, d, f;
  adj_b_max(x, y, &v, &a, &b, &c, &d, &f);
  return v;
}
ADJ_DEV double adj_min_value(double x, double y) {
  double v, a, b, c, d, f;
  adj_b_min(x, y, &v, &a, &b, &c, &d, &f);
  return v;
}
ADJ_FOLD(adj_fold_max, acc = adj_max_value(acc, y))
ADJ_FOLD(adj_fold_min, acc = adj_min_value(acc, y))
