/* adjoint-array: the fixed kernels of the CUDA backend's executor (`run.rs`), appended to the
 * prelude. Like the generated kernels, each thread computes its elements of the output (one, or
 * a block of a matrix product) in a fixed order, with no floating-point atomics: results are
 * the same on every run. The tests run these kernels as C with a loop over the threads (over
 * the blocks for the tiled product, `adj_matmul_tiled`, the one kernel with shared memory and
 * barriers).
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

/* Matrix products of strided views, c[i, j] = Σ_k a[i·ars + k·acs] · b[k·brs + j·bcs], the
 * sum in the order of k (as a thread per element would add it), each thread computing a block
 * of ADJ_MM × ADJ_MM elements of c: a step of k loads ADJ_MM values of a and ADJ_MM of b for
 * ADJ_MM² products (one thread per element loaded two per product). Rows and columns past the
 * edge are computed on clamped indices and not stored. */
#define ADJ_MM 4

/* the block of c at rows i0.., columns j0.. over k in [lo, hi), into s */
ADJ_DEV void adj_mm_block(unsigned long long i0, unsigned long long j0, unsigned long long rows,
                          unsigned long long cols, unsigned long long lo, unsigned long long hi,
                          const double* a, unsigned long long ars, unsigned long long acs,
                          const double* b, unsigned long long brs, unsigned long long bcs,
                          double s[ADJ_MM][ADJ_MM]) {
  unsigned long long ia[ADJ_MM], jb[ADJ_MM];
  for (int u = 0; u < ADJ_MM; u++) {
    ia[u] = (i0 + u < rows ? i0 + u : rows - 1) * ars;
    jb[u] = (j0 + u < cols ? j0 + u : cols - 1) * bcs;
    for (int v = 0; v < ADJ_MM; v++) s[u][v] = 0.0;
  }
  for (unsigned long long k = lo; k < hi; k++) {
    double x[ADJ_MM], y[ADJ_MM];
    for (int u = 0; u < ADJ_MM; u++) {
      x[u] = a[ia[u] + k * acs];
      y[u] = b[k * brs + jb[u]];
    }
    for (int u = 0; u < ADJ_MM; u++)
      for (int v = 0; v < ADJ_MM; v++) s[u][v] += x[u] * y[v];
  }
}

/* c = A B, thread e computing block (e / cb, e % cb), cb = ⌈cols / ADJ_MM⌉;
 * n = ⌈rows / ADJ_MM⌉ · cb */
ADJ_KERNEL adj_matmul(unsigned long long n, unsigned long long rows, unsigned long long cols,
                      unsigned long long inner,
                      const double* a, unsigned long long ars, unsigned long long acs,
                      const double* b, unsigned long long brs, unsigned long long bcs, double* c) {
  const unsigned long long e = ADJ_ELEMENT;
  if (e >= n) return;
  const unsigned long long cb = (cols + ADJ_MM - 1) / ADJ_MM;
  const unsigned long long i0 = e / cb * ADJ_MM, j0 = e % cb * ADJ_MM;
  double s[ADJ_MM][ADJ_MM];
  adj_mm_block(i0, j0, rows, cols, 0, inner, a, ars, acs, b, brs, bcs, s);
  for (int u = 0; u < ADJ_MM; u++)
    for (int v = 0; v < ADJ_MM; v++)
      if (i0 + u < rows && j0 + v < cols) c[(i0 + u) * cols + j0 + v] = s[u][v];
}

/* The tiled product, a block of ADJ_TILE_THREADS threads per ADJ_TM × ADJ_TM tile of c: the
 * sums adj_mm_block computes (c[i, j] = Σ_k a[i·ars + k·acs] · b[k·brs + j·bcs] over the
 * block's part of k, in the order of k, from 0.0), with ADJ_TK steps of k of both operands staged in shared memory, so a
 * value loaded from global memory serves ADJ_TM products instead of ADJ_MM. Thread m computes
 * rows i0 + m / 16 + 16u and columns j0 + m % 16 + 16v (u, v < 4): a warp reads 16 consecutive
 * values of the b stage and two of the a stage (no bank conflicts); the stages are filled along
 * whichever of an operand's strides is 1 (coalesced loads of row-major data and of transposes),
 * one column of padding keeping those stores free of bank conflicts too.
 *
 * Block `blk` computes part p = blk / tiles of tile blk % tiles (tiles = ⌈rows / ADJ_TM⌉ ·
 * ⌈cols / ADJ_TM⌉, numbered row-major): k in [p·chunk, min((p + 1)·chunk, inner)), into
 * out[p·rows·cols + i·cols + j] (with one part, c itself; with more, adj_add_parts adds them in
 * order). n = tiles · parts blocks of ADJ_TILE_THREADS threads. On the GPU every thread makes
 * exactly one pass of the loop over m (ADJ_THREADS = ADJ_TILE_THREADS), so every thread of a
 * block reaches every barrier. */
#define ADJ_TM 64
#define ADJ_TK 16
#define ADJ_TILE_THREADS 256
ADJ_KERNEL adj_matmul_tiled(unsigned long long n, unsigned long long rows, unsigned long long cols,
                            unsigned long long inner, unsigned long long chunk,
                            const double* a, unsigned long long ars, unsigned long long acs,
                            const double* b, unsigned long long brs, unsigned long long bcs, double* out) {
  const unsigned long long blk = ADJ_BLOCK;
  if (blk >= n) return; /* (a whole block returns: no barrier is left waiting) */
  const unsigned long long tn = (cols + ADJ_TM - 1) / ADJ_TM;
  const unsigned long long tiles = (rows + ADJ_TM - 1) / ADJ_TM * tn;
  const unsigned long long p = blk / tiles, t = blk % tiles;
  const unsigned long long i0 = t / tn * ADJ_TM, j0 = t % tn * ADJ_TM;
  const unsigned long long lo = p * chunk, hi = lo + chunk < inner ? lo + chunk : inner;
  ADJ_SHARED double sa[ADJ_TK][ADJ_TM + 1];
  ADJ_SHARED double sb[ADJ_TK][ADJ_TM + 1];
  double* o = out + p * rows * cols;
  for (unsigned m = ADJ_THREAD; m < ADJ_TILE_THREADS; m += ADJ_THREADS) {
    const unsigned ti = m / 16, tj = m % 16;
    double s[4][4];
    for (int u = 0; u < 4; u++)
      for (int v = 0; v < 4; v++) s[u][v] = 0.0;
    for (unsigned long long k0 = lo; k0 < hi; k0 += ADJ_TK) {
      const unsigned kn = hi - k0 < ADJ_TK ? (unsigned)(hi - k0) : ADJ_TK;
      ADJ_SYNC(); /* the previous step's reads are done */
      for (unsigned l = ADJ_THREAD; l < ADJ_TK * ADJ_TM; l += ADJ_THREADS) {
        /* a: along k where k is a's unit stride (row-major a), else along i */
        unsigned kk = acs == 1 ? l % ADJ_TK : l / ADJ_TM, r = acs == 1 ? l / ADJ_TK : l % ADJ_TM;
        sa[kk][r] = kk < kn && i0 + r < rows ? a[(i0 + r) * ars + (k0 + kk) * acs] : 0.0;
        /* b: along j where j is b's unit stride (row-major b), else along k */
        kk = bcs == 1 ? l / ADJ_TM : l % ADJ_TK;
        r = bcs == 1 ? l % ADJ_TM : l / ADJ_TK;
        sb[kk][r] = kk < kn && j0 + r < cols ? b[(k0 + kk) * brs + (j0 + r) * bcs] : 0.0;
      }
      ADJ_SYNC(); /* the stages are filled */
      for (unsigned kk = 0; kk < kn; kk++) {
        double x[4], y[4];
        for (int u = 0; u < 4; u++) {
          x[u] = sa[kk][ti + 16 * u];
          y[u] = sb[kk][tj + 16 * u];
        }
        for (int u = 0; u < 4; u++)
          for (int v = 0; v < 4; v++) s[u][v] += x[u] * y[v];
      }
    }
    for (int u = 0; u < 4; u++)
      for (int v = 0; v < 4; v++) {
        const unsigned long long i = i0 + ti + 16 * u, j = j0 + tj + 16 * v;
        if (i < rows && j < cols) o[i * cols + j] = s[u][v];
      }
  }
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
 * e / blocks of block e % blocks (numbered as adj_matmul's) into part[p·rows·cols + i·cols + j]
 * (then adj_add_parts); n = blocks · parts */
ADJ_KERNEL adj_matmul_parts(unsigned long long n, unsigned long long rows, unsigned long long cols,
                            unsigned long long inner, unsigned long long blocks,
                            unsigned long long chunk,
                            const double* a, unsigned long long ars, unsigned long long acs,
                            const double* b, unsigned long long brs, unsigned long long bcs, double* part) {
  const unsigned long long e = ADJ_ELEMENT;
  if (e >= n) return;
  const unsigned long long p = e / blocks, o = e % blocks;
  const unsigned long long cb = (cols + ADJ_MM - 1) / ADJ_MM;
  const unsigned long long i0 = o / cb * ADJ_MM, j0 = o % cb * ADJ_MM;
  const unsigned long long lo = p * chunk, hi = lo + chunk < inner ? lo + chunk : inner;
  double s[ADJ_MM][ADJ_MM];
  adj_mm_block(i0, j0, rows, cols, lo, hi, a, ars, acs, b, brs, bcs, s);
  double* out = part + p * rows * cols;
  for (int u = 0; u < ADJ_MM; u++)
    for (int v = 0; v < ADJ_MM; v++)
      if (i0 + u < rows && j0 + v < cols) out[(i0 + u) * cols + j0 + v] = s[u][v];
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
