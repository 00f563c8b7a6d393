/* float32 GEMM (contract in opt_gemm.h), BLIS-style:
 *
 *   for each column block jc (nc wide)            B block kc x nc packed into NR-wide panels
 *     for each depth block pc (kc deep)           (scratch, stays in L2/L3)
 *       for each row block ic (mc tall)           A block mc x kc packed into MR-tall panels
 *         for each NR panel jr, MR panel ir       register microkernel (gemm_<isa>.c)
 *
 * alpha, a bias that is a row or column vector (or scalar) and a relu / clamp activation are
 * applied by the microkernel to its registers before the store of a tile's last depth block
 * (the "tail", gemm_isa.h); what it cannot do (a full-matrix bias, other activations) is a
 * pass over the tile right after, while it is still in L1. Depth blocks are of equal size
 * (kc_of). Work is split into tasks over N (or over M when N is narrow);
 * task t packs into its own scratch block t, so any thread may run any task.
 *
 * Other paths:
 *  - M == 1 (single-token decode): a matrix-vector kernel streams B once, no packing; threads
 *    split N.
 *  - M <= 2 MR, or no scratch available: "direct" path. One B panel (kc x NR) at a time is
 *    copied to the stack and used against every row panel; A panels are packed on the stack
 *    too (once per depth block for few rows, per tile otherwise). Never fails, never
 *    allocates (about 34 KiB of stack). Without scratch, large products run at roughly half
 *    the packed path's speed (bench/gemm --temp 0).
 * Blocking per ISA (mc, kc, nc) lives with the microkernels; when the scratch arena is too
 * small for one block per task, nc and then mc shrink before the direct path is used (with
 * the module API's default 1 MiB arena, 512^3 and 64 x 768 x 2048 ran at the same ratio to
 * OpenBLAS as with 16 MiB: bench/gemm --temp 1024).
 * Scratch comes from etch_kernel_temp_try and is given back when the call returns (so kernels
 * that call this in a loop do not exhaust the arena).
 *
 * Prepacked operands (etch_opt_sgemm_pack_a/_b, made once at method load for constant
 * weights): the whole operand in the packed path's layout, depth block by depth block, so
 * the packed path reads its A / B blocks straight from there instead of packing them (and
 * takes scratch only for the other operand; none when both are packed). With a packed B the
 * packed path also serves M <= 2 MR. A packing made for another ISA, shape or kc is ignored.
 * A prepacked B is a weight read once per run, from L3 or memory: the microkernel prefetches
 * the next column panel while it works (a share per tile, gemm_isa.h's pf).
 *
 * Per-ISA extras (optional): pack_a_rm (a vectorized packing of row-major A) and ukr_rows (a
 * microkernel for a panel's first mm < MR rows only, stored straight to C: M = 64 with MR = 6
 * leaves a 4-row panel). */
#include <string.h>

#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/gemm_isa.h"
#include "kernels/optimized/opt_gemm.h"
#include "runtime/context.h"

#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* ---- scalar building blocks (always available; gcc vectorizes them for the baseline) ---- */

#define S_MR 4
#define S_NR 8

static void ukr_scalar(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c,
                       int64_t ldc, int accumulate, const etch_sgemm_tail *tail,
                       const char *pf) {
    (void)pf; /* no prefetch in the portable code */
    float acc[S_MR][S_NR];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        const float *a = ap + k * S_MR, *b = bp + k * ldb;
        for (int i = 0; i < S_MR; i++)
            for (int j = 0; j < S_NR; j++)
                acc[i][j] += a[i] * b[j];
    }
    for (int i = 0; i < S_MR; i++)
        for (int j = 0; j < S_NR; j++) {
            float v = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
            c[i * ldc + j] = tail ? etch_sgemm_tail_one(tail, v, i, j) : v;
        }
}

static void gemv_n_scalar(int64_t K, int64_t n, const float *x, int64_t x_s, const float *b,
                          int64_t ldb, float *y) {
    for (int64_t j = 0; j < n; j++)
        y[j] = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        const float xv = x[k * x_s], *row = b + k * ldb;
        for (int64_t j = 0; j < n; j++)
            y[j] += xv * row[j];
    }
}

static void gemv_p_scalar(int nr, int64_t K, int64_t kc, int64_t npad, int64_t j0, int64_t n,
                          const float *x, int64_t x_s, const float *bp, float *y) {
    float acc[ETCH_SGEMM_MAX_NR];
    for (int64_t jp = j0; jp < j0 + n; jp += nr) {
        for (int l = 0; l < nr; l++)
            acc[l] = 0.0f;
        for (int64_t pc = 0; pc < K; pc += kc) {
            const int64_t kb = K - pc < kc ? K - pc : kc;
            const float *b = bp + pc * npad + jp * kb;
            for (int64_t k = 0; k < kb; k++, b += nr) {
                const float xv = x[(pc + k) * x_s];
                for (int l = 0; l < nr; l++)
                    acc[l] += xv * b[l];
            }
        }
        for (int64_t l = 0; l < nr && jp + l < j0 + n; l++)
            y[jp - j0 + l] = acc[l];
    }
}

static void gemv_t_scalar(int64_t K, int64_t n, const float *x, const float *b, int64_t ldb,
                          float *y) {
    for (int64_t j = 0; j < n; j++) {
        const float *col = b + j * ldb;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
            for (int l = 0; l < 8; l++)
                acc[l] += x[k + l] * col[k + l];
        float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for (; k < K; k++)
            s += x[k] * col[k];
        y[j] = s;
    }
}

const etch_sgemm_isa etch_sgemm_isa_scalar = {
    "scalar", S_MR, S_NR, 128, 256, 1024, ukr_scalar, gemv_n_scalar, gemv_t_scalar, NULL, 0, NULL,
    gemv_p_scalar};

const etch_sgemm_isa *etch_sgemm_isa_for(int isa) {
    switch (isa) {
#if ETCH_OPT_X86
    case ETCH_ISA_AVX2:
        return &etch_sgemm_isa_avx2;
    case ETCH_ISA_AVX512:
        return &etch_sgemm_isa_avx512;
#endif
#if ETCH_OPT_NEON
    case ETCH_ISA_NEON:
        return &etch_sgemm_isa_neon;
#endif
    default:
        return &etch_sgemm_isa_scalar;
    }
}

/* ---- shared pieces ------------------------------------------------------------------------ */

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

#define DIRECT_KC 128   /* depth block of the direct path (its stack panels) */
#define DIRECT_A_FLOATS 6144 /* the direct path's A panels (24 KiB of stack) */
#define GEMV_NB 1024    /* matrix-vector column block (the output stays in L1) */
#define TASK_FLOPS 65536 /* rough work (M*N*K) below which a task is not worth a thread */
#define GEMV_TASKS 4     /* matrix-vector tasks per thread, when there is enough work */
#define SPLIT_M_MAX_B 262144.0 /* floats of B (1 MiB) up to which threads split the rows */

/* Depth block of the packed path for depth K: the fewest blocks of at most isa->kc, of
 * equal depth (K = 688 -> 2 x 344, not 512 + 176), rounded up to 8. */
static int64_t kc_of(const etch_sgemm_isa *isa, int64_t K) {
    if (K <= isa->kc)
        return K;
    const int64_t blocks = (K + isa->kc - 1) / isa->kc;
    const int64_t kc = round_up((K + blocks - 1) / blocks, 8);
    return kc < isa->kc ? kc : isa->kc;
}

/* What the microkernel applies at the store of a tile's last depth block (the tail,
 * gemm_isa.h), and what is left for a pass over the tile afterwards (finish). */
typedef struct post {
    bool tail_bias; /* alpha and the bias go in the tail (else finish does them) */
    bool tail_act;  /* the activation too (relu, clamp, none) */
    bool bias_col;  /* the tail's bias is per column (bias_rs == 0), else per row */
    int64_t col_j;  /* the column colbuf holds (-1: none) */
    etch_sgemm_tail t;
} post;

static void post_init(post *p, const etch_sgemm_desc *d) {
    memset(p, 0, sizeof *p);
    p->col_j = -1;
    p->t.alpha = d->alpha;
    p->tail_bias = !d->bias || d->bias_rs == 0 || d->bias_cs == 0;
    p->bias_col = d->bias && d->bias_rs == 0;
    const etch_epilogue *e = d->epilogue;
    p->tail_act = p->tail_bias;
    if (e && e->act == ETCH_ACT_RELU)
        p->t.act = ETCH_SGEMM_ACT_RELU;
    else if (e && e->act == ETCH_ACT_CLAMP) {
        p->t.act = ETCH_SGEMM_ACT_CLAMP;
        p->t.lo = (float)e->lo;
        p->t.hi = (float)e->hi;
    } else if (e && e->act != ETCH_ACT_NONE)
        p->tail_act = false;
    if (!p->tail_act)
        p->t.act = ETCH_SGEMM_ACT_NONE;
}

/* The tail for the tile at rows [i, i+mm), columns [j, j+nn): bias values (beta folded in)
 * gathered into colbuf / rowbuf, zero past the edge. NULL when there is nothing to do. */
static const etch_sgemm_tail *tail_for(const etch_sgemm_desc *d, post *p, int64_t i,
                                       int64_t mm, int64_t j, int64_t nn, int mr, int nr,
                                       float *colbuf, float *rowbuf) {
    if (!p->tail_bias)
        return NULL;
    p->t.col = p->t.row = NULL;
    if (d->bias && p->bias_col) {
        if (p->col_j != j) { /* tiles of a column panel run one after another */
            const float *b = d->bias + j * d->bias_cs;
            for (int64_t c = 0; c < nn; c++)
                colbuf[c] = d->beta * b[c * d->bias_cs];
            for (int64_t c = nn; c < nr; c++)
                colbuf[c] = 0.0f;
            p->col_j = j;
            if (d->bias_cs == 1 && j + 2 * nr <= d->N)
                PREFETCH(b + nr); /* the next panel's (a bias is cold, as the weights) */
        }
        p->t.col = colbuf;
    } else if (d->bias) {
        const float *b = d->bias + i * d->bias_rs;
        for (int64_t r = 0; r < mr; r++)
            rowbuf[r] = r < mm ? d->beta * b[r * d->bias_rs] : 0.0f;
        p->t.row = rowbuf;
    }
    if (!p->t.col && !p->t.row && p->t.alpha == 1.0f && p->t.act == ETCH_SGEMM_ACT_NONE)
        return NULL;
    return &p->t;
}

/* After a tile's tail: what it did not do (the whole of alpha, bias and activation when the
 * bias is a full matrix, else the activation when it is not relu or clamp). */
static void finish_after_tail(const etch_sgemm_desc *d, const post *p, int64_t i0, int64_t i1,
                              int64_t j0, int64_t j1);

/* c[i0:i1, j0:j1] = act(alpha * c + beta * bias) */
static void finish(const etch_sgemm_desc *d, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const bool scale = d->alpha != 1.0f;
    for (int64_t i = i0; i < i1; i++) {
        float *c = d->c + i * d->ldc;
        if (scale)
            for (int64_t j = j0; j < j1; j++)
                c[j] *= d->alpha;
        if (d->bias) {
            const float *bias = d->bias + i * d->bias_rs;
            const float beta = d->beta;
            if (d->bias_cs == 1)
                for (int64_t j = j0; j < j1; j++)
                    c[j] += beta * bias[j];
            else
                for (int64_t j = j0; j < j1; j++)
                    c[j] += beta * bias[j * d->bias_cs];
        }
        etch_opt_apply_epilogue(d->epilogue, c + j0, j1 - j0);
    }
}

static void finish_after_tail(const etch_sgemm_desc *d, const post *p, int64_t i0, int64_t i1,
                              int64_t j0, int64_t j1) {
    if (!p->tail_bias)
        finish(d, i0, i1, j0, j1);
    else if (!p->tail_act)
        for (int64_t i = i0; i < i1; i++)
            etch_opt_apply_epilogue(d->epilogue, d->c + i * d->ldc + j0, j1 - j0);
}

/* A rows [i, i+mm) x depth [p, p+kb) -> kb groups of mr floats (zero rows past mm). */
static void pack_a_panel(const etch_sgemm_desc *d, const etch_sgemm_isa *isa, int mr,
                         int64_t i, int64_t mm, int64_t p, int64_t kb, float *ap) {
    const float *a = d->a + i * d->a_rs + p * d->a_cs;
    if (d->a_cs == 1 && isa && isa->pack_a_rm && isa->mr == mr) {
        isa->pack_a_rm(a, d->a_rs, mm, kb, ap);
        return;
    }
    if (mm < mr)
        memset(ap, 0, (size_t)(kb * mr) * sizeof(float));
    if (d->a_rs == 1) { /* columns of A contiguous */
        for (int64_t k = 0; k < kb; k++) {
            const float *col = a + k * d->a_cs;
            for (int64_t r = 0; r < mm; r++)
                ap[k * mr + r] = col[r];
        }
    } else {
        for (int64_t r = 0; r < mm; r++) {
            const float *row = a + r * d->a_rs;
            if (d->a_cs == 1)
                for (int64_t k = 0; k < kb; k++)
                    ap[k * mr + r] = row[k];
            else
                for (int64_t k = 0; k < kb; k++)
                    ap[k * mr + r] = row[k * d->a_cs];
        }
    }
}

#define PF_ROWS 8



/* B depth [p, p+kb) x columns [j, j+nn) -> kb rows of nr floats (zero columns past nn). */
static void pack_b_panel(const etch_sgemm_desc *d, int nr, int64_t p, int64_t kb, int64_t j,
                         int64_t nn, float *bp) {
    const float *b = d->b + p * d->b_rs + j * d->b_cs;
    if (d->b_cs == 1) {
        if (nn == 16 && nr == 16) { /* a constant size: the copy is inlined, no libc call */
            for (int64_t k = 0; k < kb; k++) {
                if (k + PF_ROWS < kb)
                    PREFETCH(b + (k + PF_ROWS) * d->b_rs);
                memcpy(bp + k * 16, b + k * d->b_rs, 16 * sizeof(float));
            }
            return;
        }
        for (int64_t k = 0; k < kb; k++) {
            if (k + PF_ROWS < kb) /* rows far apart: no hardware prefetch across pages */
                PREFETCH(b + (k + PF_ROWS) * d->b_rs);
            memcpy(bp + k * nr, b + k * d->b_rs, (size_t)nn * sizeof(float));
            for (int64_t c = nn; c < nr; c++)
                bp[k * nr + c] = 0.0f;
        }
        return;
    }
    if (nn < nr)
        memset(bp, 0, (size_t)(kb * nr) * sizeof(float));
    for (int64_t c = 0; c < nn; c++) {
        const float *col = b + c * d->b_cs;
        if (d->b_rs == 1)
            for (int64_t k = 0; k < kb; k++)
                bp[k * nr + c] = col[k];
        else
            for (int64_t k = 0; k < kb; k++)
                bp[k * nr + c] = col[k * d->b_rs];
    }
}

/* A whole B block, depth [p, p+kb) x columns [j, j+nb), into consecutive panels. Row-major B
 * is copied four panels at a time, k by k: runs of 4 * nr floats from each row (friendly to
 * the prefetchers), four destination streams (all panels at once would be kb * nr * 4 bytes
 * apart, the same cache set: thrashing). */
static void pack_b_block(const etch_sgemm_desc *d, int nr, int64_t p, int64_t kb, int64_t j,
                         int64_t nb, float *bpack) {
    int64_t jr = 0;
    if (d->b_cs == 1 && (nr == 8 || nr == 16 || nr == 32)) {
        const int64_t step = kb * nr; /* from one panel to the next */
        for (; jr + 4 * nr <= nb; jr += 4 * nr) {
            const float *src = d->b + p * d->b_rs + j + jr;
            float *dst = bpack + jr * kb;
            for (int64_t k = 0; k < kb; k++, src += d->b_rs, dst += nr) {
                /* rows are far apart (hardware prefetchers stop at page boundaries): fetch
                 * the run PF_ROWS rows ahead */
                if (k + PF_ROWS < kb) {
                    const float *pf = src + PF_ROWS * d->b_rs;
                    for (int l = 0; l < 4 * nr; l += 16)
                        PREFETCH(pf + l);
                }
                if (nr == 16) {
                    memcpy(dst, src, 16 * sizeof(float));
                    memcpy(dst + step, src + 16, 16 * sizeof(float));
                    memcpy(dst + 2 * step, src + 32, 16 * sizeof(float));
                    memcpy(dst + 3 * step, src + 48, 16 * sizeof(float));
                } else if (nr == 32) {
                    memcpy(dst, src, 32 * sizeof(float));
                    memcpy(dst + step, src + 32, 32 * sizeof(float));
                    memcpy(dst + 2 * step, src + 64, 32 * sizeof(float));
                    memcpy(dst + 3 * step, src + 96, 32 * sizeof(float));
                } else {
                    memcpy(dst, src, 8 * sizeof(float));
                    memcpy(dst + step, src + 8, 8 * sizeof(float));
                    memcpy(dst + 2 * step, src + 16, 8 * sizeof(float));
                    memcpy(dst + 3 * step, src + 24, 8 * sizeof(float));
                }
            }
        }
    }
    for (; jr < nb; jr += nr)
        pack_b_panel(d, nr, p, kb, j + jr, nb - jr < nr ? nb - jr : nr, bpack + jr * kb);
}

/* One mm x nn tile (mm <= mr, nn <= nr) at c, with the tail when it is the last depth
 * block; a full tile goes straight to C, a partial one through a stack tile. */
static void tile(const etch_sgemm_isa *isa, int64_t kb, const float *ap, const float *bp,
                 int64_t ldb, float *c, int64_t ldc, int64_t mm, int64_t nn, bool first,
                 const etch_sgemm_tail *tail, const char *pf) {
    if (nn == isa->nr && (mm == isa->mr || isa->ukr_rows)) {
        if (mm == isa->mr)
            isa->ukr(kb, ap, bp, ldb, c, ldc, !first, tail, pf);
        else
            isa->ukr_rows((int)mm, kb, ap, bp, ldb, c, ldc, !first, tail, pf);
        return;
    }
    const int nr = isa->nr;
    float t[ETCH_SGEMM_MAX_MR * ETCH_SGEMM_MAX_NR];
    if (!first) {
        memset(t, 0, (size_t)(isa->mr * nr) * sizeof(float));
        for (int64_t i = 0; i < mm; i++)
            memcpy(t + i * nr, c + i * ldc, (size_t)nn * sizeof(float));
    }
    isa->ukr(kb, ap, bp, ldb, t, nr, !first, tail, pf);
    for (int64_t i = 0; i < mm; i++)
        memcpy(c + i * ldc, t + i * nr, (size_t)nn * sizeof(float));
}

/* ---- packed path: rectangle [i0,i1) x [j0,j1) with scratch ---------------------------------- */

/* pa / pb: prepacked A / B (whole operand, depth blocks of kc; mpad / npad: M, N rounded up to
 * the tile) or NULL to pack into apack / bpack here. i0 and every ic are multiples of mr, j0
 * and every jc multiples of nr, so a block of the prepacked operand starts at
 * pc * mpad + ic * kb (A) / pc * npad + jc * kb (B), the layout pack_a_panel / pack_b_block
 * write. */
static void gemm_packed(const etch_sgemm_desc *d, const etch_sgemm_isa *isa, int64_t i0,
                        int64_t i1, int64_t j0, int64_t j1, float *apack, float *bpack,
                        int64_t mc, int64_t kc, int64_t nc, const float *pa, const float *pb) {
    const int mr = isa->mr, nr = isa->nr;
    const int64_t mpad = round_up(d->M, mr), npad = round_up(d->N, nr);
    post po;
    post_init(&po, d);
    float colbuf[ETCH_SGEMM_MAX_NR], rowbuf[ETCH_SGEMM_MAX_MR];
    for (int64_t jc = j0; jc < j1; jc += nc) {
        const int64_t nb = min64(nc, j1 - jc);
        for (int64_t pc = 0; pc < d->K; pc += kc) {
            const int64_t kb = min64(kc, d->K - pc);
            const bool first = pc == 0, last = pc + kb == d->K;
            const float *bblk = bpack;
            if (pb)
                bblk = pb + pc * npad + jc * kb;
            else
                pack_b_block(d, nr, pc, kb, jc, nb, bpack);
            for (int64_t ic = i0; ic < i1; ic += mc) {
                const int64_t mb = min64(mc, i1 - ic);
                const float *ablk = apack;
                /* the block's first B panel (nothing prefetched it: the tiles fetch the
                 * next one) comes while A is packed, a share per A panel */
                const char *pf0 = pb && isa->pf_b > 0 ? (const char *)bblk : NULL;
                const int64_t pf0_lines = (int64_t)nr * kb / 16,
                              pf0_step = (pf0_lines * mr + mb - 1) / mb;
                int64_t pf0_at = 0;
                if (pa)
                    ablk = pa + pc * mpad + ic * kb;
                else
                    for (int64_t ir = 0; ir < mb; ir += mr) {
                        for (int64_t l = 0; pf0 && l < pf0_step && pf0_at < pf0_lines;
                             l++, pf0_at++)
                            PREFETCH(pf0 + pf0_at * 64);
                        pack_a_panel(d, isa, mr, ic + ir, min64(mr, mb - ir), pc, kb,
                                     apack + ir * kb);
                    }
                for (int64_t jr = 0; jr < nb; jr += nr) {
                    const int64_t nn = min64(nr, nb - jr);
                    /* a prepacked B (a weight, read once per run: from L3 or memory) is
                     * fetched isa->pf_b panels ahead: each tile's microkernel prefetches a
                     * share of it, one line per ETCH_SGEMM_PF_K steps of k (the panels of
                     * one depth block lie one after another across column blocks) */
                    const char *pf_base = NULL;
                    int64_t pf_off = 0, pf_max = 0; /* bytes from pf_base */
                    const int64_t pf_share = kb / ETCH_SGEMM_PF_K * 64;
                    if (pb && isa->pf_b > 0) {
                        /* that one panel only (the first tiles: more would evict the
                         * panel in use from L1), within this depth block's panels */
                        pf_base = (const char *)bblk;
                        pf_off = (jr + isa->pf_b * nr) * kb * (int64_t)sizeof(float);
                        pf_max = min64(pf_off + nr * kb * (int64_t)sizeof(float),
                                       (npad - jc) * kb * (int64_t)sizeof(float));
                    }
                    for (int64_t ir = 0; ir < mb; ir += mr) {
                        const int64_t mm = min64(mr, mb - ir);
                        float *c = d->c + (ic + ir) * d->ldc + jc + jr;
                        const char *tpf =
                            pf_base && pf_off + pf_share <= pf_max ? pf_base + pf_off : NULL;
                        pf_off += pf_share;
                        const etch_sgemm_tail *tl =
                            last ? tail_for(d, &po, ic + ir, mm, jc + jr, nn, mr, nr, colbuf,
                                            rowbuf)
                                 : NULL;
                        tile(isa, kb, ablk + ir * kb, bblk + jr * kb, nr, c, d->ldc, mm, nn,
                             first, tl, tpf);
                        if (last)
                            finish_after_tail(d, &po, ic + ir, ic + ir + mm, jc + jr,
                                              jc + jr + nn);
                    }
                }
            }
        }
    }
}

/* ---- direct path: no scratch, panels on the stack ---------------------------------------- */

/* Column panel by column panel: the B panel is copied to the stack (contiguous, so the
 * microkernel never reads rows that are a power of two apart, which collide in one cache
 * set) and used against every row panel. A: when its row panels fit DIRECT_A_FLOATS (up to
 * 64 rows with AVX2: small M, and bmm's per-head products of attention, which run here on
 * each thread) all of them are packed once per depth block; otherwise (only when there is
 * no scratch) each is re-packed per tile. */
static void gemm_direct(const etch_sgemm_desc *d, const etch_sgemm_isa *isa, int64_t i0,
                        int64_t i1, int64_t j0, int64_t j1) {
    const int mr = isa->mr, nr = isa->nr;
    float ap[DIRECT_A_FLOATS];
    float bp[ETCH_SGEMM_MAX_NR * DIRECT_KC];
    _Static_assert(DIRECT_A_FLOATS >= ETCH_SGEMM_MAX_MR * DIRECT_KC, "direct A panel");
    const bool a_once = round_up(i1 - i0, mr) * min64(DIRECT_KC, d->K) <= DIRECT_A_FLOATS;
    post po;
    post_init(&po, d);
    float colbuf[ETCH_SGEMM_MAX_NR], rowbuf[ETCH_SGEMM_MAX_MR];
    for (int64_t pc = 0; pc < d->K; pc += DIRECT_KC) {
        const int64_t kb = min64(DIRECT_KC, d->K - pc);
        const bool first = pc == 0, last = pc + kb == d->K;
        if (a_once)
            for (int64_t ir = i0; ir < i1; ir += mr)
                pack_a_panel(d, isa, mr, ir, min64(mr, i1 - ir), pc, kb, ap + (ir - i0) * kb);
        for (int64_t jr = j0; jr < j1; jr += nr) {
            const int64_t nn = min64(nr, j1 - jr);
            pack_b_panel(d, nr, pc, kb, jr, nn, bp);
            for (int64_t ir = i0; ir < i1; ir += mr) {
                const int64_t mm = min64(mr, i1 - ir);
                const float *apanel = ap + (ir - i0) * kb;
                if (!a_once) {
                    pack_a_panel(d, isa, mr, ir, mm, pc, kb, ap);
                    apanel = ap;
                }
                const etch_sgemm_tail *tl =
                    last ? tail_for(d, &po, ir, mm, jr, nn, mr, nr, colbuf, rowbuf) : NULL;
                tile(isa, kb, apanel, bp, nr, d->c + ir * d->ldc + jr, d->ldc, mm, nn, first,
                     tl, NULL);
                if (last)
                    finish_after_tail(d, &po, ir, ir + mm, jr, jr + nn);
            }
        }
    }
}

/* ---- matrix-vector path (M == 1) ----------------------------------------------------------- */

static bool gemv_ok(const etch_sgemm_desc *d) {
    return d->M == 1 && (d->b_cs == 1 || (d->b_rs == 1 && d->a_cs == 1));
}

static void gemv_cols(const etch_sgemm_desc *d, const etch_sgemm_isa *isa, int64_t j0,
                      int64_t j1) {
    for (int64_t j = j0; j < j1; j += GEMV_NB) {
        const int64_t n = min64(GEMV_NB, j1 - j);
        if (d->b_cs == 1)
            isa->gemv_n(d->K, n, d->a, d->a_cs, d->b + j, d->b_rs, d->c + j);
        else
            isa->gemv_t(d->K, n, d->a, d->b + j * d->b_cs, d->b_cs, d->c + j);
        finish(d, 0, 1, j, j + n);
    }
}

/* ---- planning and tasks ------------------------------------------------------------------- */

typedef enum { RUN_GEMV, RUN_GEMV_P, RUN_DIRECT, RUN_PACKED } run_kind;

typedef struct plan {
    const etch_sgemm_desc *d;
    const etch_sgemm_isa *isa;
    run_kind kind;
    int64_t ntasks;
    bool split_m;     /* tasks split M (else N) */
    int64_t step;     /* rows or columns per task */
    float *scratch;   /* RUN_PACKED: ntasks blocks of block_floats (NULL when 0) */
    int64_t block_floats, mc, kc, nc;
    const float *pa, *pb; /* prepacked A / B data matching this call, or NULL */
} plan;

static void run_task(const plan *p, int64_t t) {
    const etch_sgemm_desc *d = p->d;
    int64_t i0 = 0, i1 = d->M, j0 = 0, j1 = d->N;
    if (p->split_m) {
        i0 = t * p->step;
        i1 = min64(d->M, i0 + p->step);
    } else {
        j0 = t * p->step;
        j1 = min64(d->N, j0 + p->step);
    }
    if (i0 >= i1 || j0 >= j1)
        return;
    switch (p->kind) {
    case RUN_GEMV:
        gemv_cols(d, p->isa, j0, j1);
        break;
    case RUN_GEMV_P:
        p->isa->gemv_p(p->isa->nr, d->K, p->kc, round_up(d->N, p->isa->nr), j0, j1 - j0, d->a,
                       d->a_cs, p->pb, d->c + j0);
        finish(d, 0, 1, j0, j1);
        break;
    case RUN_DIRECT:
        gemm_direct(d, p->isa, i0, i1, j0, j1);
        break;
    case RUN_PACKED: {
        float *apack = p->scratch ? p->scratch + t * p->block_floats : NULL;
        float *bpack = apack && !p->pa ? apack + p->mc * p->kc : apack;
        gemm_packed(d, p->isa, i0, i1, j0, j1, apack, bpack, p->mc, p->kc, p->nc, p->pa,
                    p->pb);
        break;
    }
    }
}

static void task_range(void *arg, int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; t++)
        run_task((const plan *)arg, t);
}

/* Split `units` (panels of `unit` rows/columns) over at most `want` tasks. */
static void split(plan *p, int64_t extent, int64_t unit, int64_t want) {
    const int64_t units = (extent + unit - 1) / unit;
    int64_t n = want < units ? want : units;
    if (n < 1)
        n = 1;
    p->step = (units + n - 1) / n * unit;
    p->ntasks = (extent + p->step - 1) / p->step;
}

static void k_zero(const etch_sgemm_desc *d) {
    for (int64_t i = 0; i < d->M; i++) {
        float *c = d->c + i * d->ldc;
        for (int64_t j = 0; j < d->N; j++)
            c[j] = 0.0f;
    }
    finish(d, 0, d->M, 0, d->N);
}

void etch_opt_sgemm(etch_kernel_context *ctx, const etch_sgemm_desc *d) {
    etch_opt_sgemm_isa(ctx, d, etch_sgemm_isa_for((int)etch_isa_active()));
}

void etch_opt_sgemm_isa(etch_kernel_context *ctx, const etch_sgemm_desc *d,
                        const etch_sgemm_isa *isa) {
    if (d->M <= 0 || d->N <= 0)
        return;
    if (d->K <= 0) {
        k_zero(d);
        return;
    }
    plan p;
    memset(&p, 0, sizeof p);
    p.d = d;
    p.isa = isa;
    const int mr = p.isa->mr, nr = p.isa->nr;
    const int threads = ctx ? etch_kernel_num_threads(ctx) : 1;
    const double work = (double)d->M * (double)d->N * (double)d->K;
    int64_t want = work / TASK_FLOPS < threads ? (int64_t)(work / TASK_FLOPS) : threads;
    if (want < 1)
        want = 1;
    const size_t temp_mark = ctx ? ctx->temp_used : 0;
    const int64_t kc0 = kc_of(p.isa, d->K);
    const etch_sgemm_packed *xa = d->a_packed, *xb = d->b_packed;
    if (xa && xa->data && xa->isa == (const void *)isa && xa->outer == d->M && xa->K == d->K &&
        xa->kc == kc0)
        p.pa = xa->data;
    if (xb && xb->data && xb->isa == (const void *)isa && xb->outer == d->N && xb->K == d->K &&
        xb->kc == kc0)
        p.pb = xb->data;

    /* matrix-vector products: GEMV_TASKS tasks per thread, so that the pool can move work
     * from a slowed thread to the other (each column is read once however it is split) */
    const int64_t want_v = threads > 1 && work / TASK_FLOPS >= (double)threads * GEMV_TASKS
                               ? (int64_t)threads * GEMV_TASKS
                               : want;
    if (d->M == 1 && p.pb && isa->gemv_p) {
        p.kind = RUN_GEMV_P;
        p.kc = kc0;
        split(&p, d->N, 4 * (int64_t)nr, want_v); /* groups of 4 panels, as the kernel reads them */
    } else if (gemv_ok(d)) {
        p.kind = RUN_GEMV;
        split(&p, d->N, 16, want_v); /* whole cache lines of the output per task */
    } else {
        const int64_t m_units = (d->M + mr - 1) / mr, n_units = (d->N + nr - 1) / nr;
        /* split the rows when the columns are too few for the threads, and also when B is
         * small (every thread then reads all of it, from L2 or L3) and the rows make at least
         * two panels per thread: each thread writes whole rows of C, so the element-wise ops
         * that follow, split by rows (norms, gates, rotary embeddings), read rows their own
         * core wrote, where a column split leaves half of every row on each core */
        p.split_m = (n_units < want && m_units > n_units) ||
                    (want > 1 && m_units >= 2 * want &&
                     (double)d->K * (double)d->N <= SPLIT_M_MAX_B);
        if (p.split_m)
            split(&p, d->M, mr, want);
        else
            split(&p, d->N, nr, want);
        p.kind = RUN_DIRECT;
        /* packing pays off once A has a few row panels, or when B is packed already */
        if (ctx && (d->M > 2 * mr || p.pa || p.pb)) {
            const int64_t rows = p.split_m ? p.step : d->M;
            const int64_t cols = p.split_m ? d->N : p.step;
            int64_t mc = min64(p.isa->mc, round_up(rows, mr));
            const int64_t kc = kc0;
            int64_t nc = min64(p.isa->nc, round_up(cols, nr));
            for (;;) {
                /* 64-byte multiples; nothing for a prepacked operand */
                const int64_t block =
                    round_up((p.pa ? 0 : mc * kc) + (p.pb ? 0 : kc * nc), 16);
                float *s = block == 0 ? NULL
                                      : (float *)etch_kernel_temp_try(
                                            ctx, (size_t)(block * p.ntasks) * sizeof(float), 64);
                if (s || block == 0) {
                    p.kind = RUN_PACKED;
                    p.scratch = s;
                    p.block_floats = block;
                    p.mc = mc;
                    p.kc = kc;
                    p.nc = nc;
                    break;
                }
                if (nc > 4 * nr && !p.pb)
                    nc = round_up(nc / 2, nr);
                else if (mc > 2 * mr && !p.pa)
                    mc = round_up(mc / 2, mr);
                else
                    break; /* direct path */
            }
        }
    }
    if (p.ntasks > 1)
        etch_kernel_parallel_for(ctx, p.ntasks, 1, task_range, &p);
    else
        run_task(&p, 0);
    if (ctx)
        ctx->temp_used = temp_mark; /* the scratch is dead: give it back */
}

/* ---- prepacking ---------------------------------------------------------------------------- */

size_t etch_opt_sgemm_packed_size(const etch_sgemm_isa *isa, bool is_a, int64_t outer,
                                  int64_t K) {
    if (!isa)
        isa = etch_sgemm_isa_for((int)etch_isa_active());
    if (outer <= 0 || K <= 0)
        return 0;
    return (size_t)(round_up(outer, is_a ? isa->mr : isa->nr) * K) * sizeof(float);
}

static void packed_init(etch_sgemm_packed *out, const etch_sgemm_isa *isa, int64_t outer,
                        int64_t K, const float *dst) {
    out->isa = isa;
    out->outer = outer;
    out->K = K;
    out->kc = kc_of(isa, K);
    out->data = dst;
}

void etch_opt_sgemm_pack_a(const etch_sgemm_isa *isa, const float *a, int64_t rs, int64_t cs,
                           int64_t M, int64_t K, float *dst, etch_sgemm_packed *out) {
    if (!isa)
        isa = etch_sgemm_isa_for((int)etch_isa_active());
    packed_init(out, isa, M, K, dst);
    if (M <= 0 || K <= 0)
        return;
    etch_sgemm_desc d;
    memset(&d, 0, sizeof d);
    d.a = a;
    d.a_rs = rs;
    d.a_cs = cs;
    const int mr = isa->mr;
    const int64_t mpad = round_up(M, mr), kc = out->kc;
    for (int64_t pc = 0; pc < K; pc += kc) {
        const int64_t kb = min64(kc, K - pc);
        for (int64_t ir = 0; ir < M; ir += mr)
            pack_a_panel(&d, isa, mr, ir, min64(mr, M - ir), pc, kb, dst + pc * mpad + ir * kb);
    }
}

void etch_opt_sgemm_pack_b(const etch_sgemm_isa *isa, const float *b, int64_t rs, int64_t cs,
                           int64_t K, int64_t N, float *dst, etch_sgemm_packed *out) {
    if (!isa)
        isa = etch_sgemm_isa_for((int)etch_isa_active());
    packed_init(out, isa, N, K, dst);
    if (N <= 0 || K <= 0)
        return;
    etch_sgemm_desc d;
    memset(&d, 0, sizeof d);
    d.b = b;
    d.b_rs = rs;
    d.b_cs = cs;
    const int64_t npad = round_up(N, isa->nr), kc = out->kc;
    for (int64_t pc = 0; pc < K; pc += kc)
        pack_b_block(&d, isa->nr, pc, min64(kc, K - pc), 0, N, dst + pc * npad);
}
