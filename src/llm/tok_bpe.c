/* The merge engines: BPE by piece score (sentencepiece, llama2.c), BPE by rank (byte-level:
 * HF merges, tiktoken) and the unigram Viterbi. All work in the tokenizer's work buffer.
 *
 * BPE keeps the symbols in a linked list and the candidate pairs in an indexed binary heap
 * keyed by the left symbol: (cost, position) with cost = -score or rank, so the best pair
 * wins and ties go to the leftmost one, the order every reference uses. Each merge touches
 * two heap entries, so a run of n bytes costs O(n log n) heap steps and at most 3 lookups a
 * byte (a candidate is hashed only when some piece has its length; the hash reads its bytes).
 * Sentencepiece BPE's user-defined pieces and the unigram lattice come from one pass of an
 * Aho-Corasick automaton over the pieces: O(n + the pieces found), however long they are. */
#include <math.h>
#include <string.h>

#include "llm/tok_internal.h"

typedef struct bpe_ws {
    uint32_t *start, *len;
    int32_t *id, *prev, *next;
    float *cost;   /* cost of merging i with next[i] */
    int32_t *pid;  /* the merged id */
    int32_t *hpos; /* heap slot of i, -1 when i has no candidate pair */
    int32_t *heap;
    int32_t n_heap;
} bpe_ws;

size_t tok_work_bytes(size_t chunk_cap) {
    size_t bpe = 9 * sizeof(int32_t) * (chunk_cap + 1);
    size_t uni = 4 * sizeof(int32_t) * (chunk_cap + 1); /* score, length, id */
    return bpe > uni ? bpe : uni;
}

static bpe_ws ws_of(const etch_tokenizer *t) {
    size_t c = t->chunk_cap + 1;
    int32_t *base = t->work;
    bpe_ws w;
    w.start = (uint32_t *)base;
    w.len = (uint32_t *)(base + c);
    w.id = base + 2 * c;
    w.prev = base + 3 * c;
    w.next = base + 4 * c;
    w.cost = (float *)(base + 5 * c);
    w.pid = base + 6 * c;
    w.hpos = base + 7 * c;
    w.heap = base + 8 * c;
    w.n_heap = 0;
    return w;
}

static int heap_less(const bpe_ws *w, int32_t a, int32_t b) {
    if (w->cost[a] != w->cost[b]) return w->cost[a] < w->cost[b];
    return w->start[a] < w->start[b];
}

static void heap_swap(bpe_ws *w, int32_t i, int32_t j) {
    int32_t a = w->heap[i], b = w->heap[j];
    w->heap[i] = b;
    w->heap[j] = a;
    w->hpos[b] = i;
    w->hpos[a] = j;
}

static void heap_up(bpe_ws *w, int32_t i) {
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!heap_less(w, w->heap[i], w->heap[p])) break;
        heap_swap(w, i, p);
        i = p;
    }
}

static void heap_down(bpe_ws *w, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < w->n_heap && heap_less(w, w->heap[l], w->heap[m])) m = l;
        if (r < w->n_heap && heap_less(w, w->heap[r], w->heap[m])) m = r;
        if (m == i) break;
        heap_swap(w, i, m);
        i = m;
    }
}

static void heap_remove(bpe_ws *w, int32_t sym) {
    int32_t i = w->hpos[sym];
    if (i < 0) return;
    w->hpos[sym] = -1;
    int32_t last = --w->n_heap;
    if (i != last) {
        w->heap[i] = w->heap[last];
        w->hpos[w->heap[i]] = i;
        heap_down(w, i);
        heap_up(w, i);
    }
}

/* Is there a merge for sym and its right neighbour? Sets cost/pid and (re)places it in the
 * heap, or removes it. */
static void eval_pair(etch_tokenizer *t, const uint8_t *s, bpe_ws *w, int32_t a) {
    int32_t b = w->next[a];
    int32_t id = -1;
    float cost = 0;
    if (b >= 0) {
        if (t->model == TOK_MODEL_BPE_RANK && t->use_pairs) {
            if (w->id[a] >= 0 && w->id[b] >= 0) {
                t->work_done++;
                const tok_pair_slot *p = tok_pairs_get(t, w->id[a], w->id[b]);
                if (p) {
                    id = p->merged;
                    cost = (float)p->rank;
                }
            }
        } else if (tok_len_present(t, (size_t)w->len[a] + w->len[b])) {
            /* only lengths that some piece has: a long pair is hashed only when it may be one */
            t->work_done++;
            id = tok_map_get(t, &t->pieces, s + w->start[a], w->len[a] + w->len[b]);
            if (id >= 0)
                cost = t->model == TOK_MODEL_BPE_RANK ? t->tokens[id].score : -t->tokens[id].score;
        }
    }
    if (id < 0) {
        heap_remove(w, a);
        return;
    }
    w->cost[a] = cost;
    w->pid[a] = id;
    if (w->hpos[a] < 0) {
        w->hpos[a] = w->n_heap;
        w->heap[w->n_heap++] = a;
        heap_up(w, w->hpos[a]);
    } else {
        heap_down(w, w->hpos[a]);
        heap_up(w, w->hpos[a]);
    }
}

/* Sentencepiece BPE with user-defined pieces: the longest user-defined piece starting at
 * each position of s[0..n), in ulen[] (0: none) and uid[], from one pass of their automaton. */
static void user_pieces(etch_tokenizer *t, const uint8_t *s, size_t n, uint32_t *ulen,
                        int32_t *uid) {
    const tok_ac *ac = &t->match;
    memset(ulen, 0, n * sizeof *ulen);
    int32_t st = 0;
    for (size_t e = 1; e <= n; e++) {
        st = tok_ac_step(ac, st, s[e - 1], &t->work_done);
        for (int32_t v = ac->out[st] >= 0 ? st : ac->dict[st]; v >= 0; v = ac->dict[v]) {
            t->work_done++;
            uint32_t l = ac->depth[v];
            size_t b = e - l;
            if (l > ulen[b]) {
                ulen[b] = l;
                uid[b] = ac->out[v];
            }
        }
    }
}

/* Length of the initial symbol at s[0..n): a user-defined piece (longest: ulen/uid at this
 * position, from user_pieces), else one char. */
static uint32_t first_symbol(const etch_tokenizer *t, const uint8_t *s, size_t n, uint32_t ulen,
                             int32_t uid, int32_t *id) {
    if (t->model == TOK_MODEL_BPE_RANK) {
        *id = t->byte_ids[s[0]];
        return 1;
    }
    if (ulen) {
        *id = uid;
        return ulen;
    }
    uint32_t l;
    if (t->llama2c_chars) {
        /* llama2.c: a byte and the continuation bytes after it, at most 4 */
        l = 1;
        while (l < n && l < 4 && (s[l] & 0xC0) == 0x80) l++;
    } else {
        uint32_t cp;
        l = (uint32_t)tok_utf8_next(s, n, &cp);
    }
    *id = tok_map_get(t, &t->pieces, s, l);
    return l;
}

static void emit_symbol(const etch_tokenizer *t, const uint8_t *s, uint32_t len, int32_t id,
                        tok_out *out) {
    if (id >= 0) {
        tok_emit(out, id);
        return;
    }
    if (t->byte_fallback) {
        for (uint32_t i = 0; i < len; i++) {
            int32_t b = t->byte_ids[s[i]];
            tok_emit(out, b >= 0 ? b : t->unk_id);
        }
    } else if (t->unk_id >= 0) {
        tok_emit(out, t->unk_id);
    }
}

void tok_bpe_chunk(etch_tokenizer *t, const uint8_t *s, size_t n, tok_out *out) {
    if (n == 0) return;
    if (t->model == TOK_MODEL_BPE_RANK && t->whole_word) {
        t->work_done++;
        int32_t id = tok_map_get(t, &t->pieces, s, n);
        if (id >= 0) {
            tok_emit(out, id);
            return;
        }
    }
    bpe_ws w = ws_of(t);
    /* the user-defined matches live in heap[] and pid[] until the merges start */
    uint32_t *ulen = (uint32_t *)w.heap;
    int32_t *uid = w.pid;
    int user = t->model == TOK_MODEL_BPE_SCORE && t->match.n_nodes > 0;
    if (user) user_pieces(t, s, n, ulen, uid);
    int32_t ns = 0;
    for (size_t p = 0; p < n;) {
        int32_t id;
        t->work_done++;
        uint32_t l = first_symbol(t, s + p, n - p, user ? ulen[p] : 0, user ? uid[p] : -1, &id);
        w.start[ns] = (uint32_t)p;
        w.len[ns] = l;
        w.id[ns] = id;
        w.prev[ns] = ns - 1;
        w.next[ns] = ns + 1;
        w.hpos[ns] = -1;
        ns++;
        p += l;
    }
    w.next[ns - 1] = -1;
    for (int32_t i = 0; i + 1 < ns; i++) eval_pair(t, s, &w, i);
    while (w.n_heap > 0) {
        int32_t a = w.heap[0];
        int32_t b = w.next[a];
        heap_remove(&w, a);
        heap_remove(&w, b);
        w.len[a] += w.len[b];
        w.id[a] = w.pid[a];
        w.next[a] = w.next[b];
        if (w.next[a] >= 0) w.prev[w.next[a]] = a;
        eval_pair(t, s, &w, a);
        if (w.prev[a] >= 0) eval_pair(t, s, &w, w.prev[a]);
    }
    int prev_unk = 0;
    for (int32_t i = 0; i >= 0; i = w.next[i]) {
        if (w.id[i] < 0 && !t->byte_fallback && !t->llama2c_chars) {
            /* sentencepiece (and byte-level BPE without the byte) : a run of unknown
             * symbols is one unknown piece */
            if (!prev_unk && t->unk_id >= 0) tok_emit(out, t->unk_id);
            prev_unk = 1;
            continue;
        }
        prev_unk = 0;
        emit_symbol(t, s + w.start[i], w.len[i], w.id[i], out);
    }
}

/* ---------------------------------------------------------------- unigram */

void tok_unigram_chunk(etch_tokenizer *t, const uint8_t *s, size_t n, tok_out *out) {
    if (n == 0) return;
    size_t c = t->chunk_cap + 1;
    /* Path scores add up in float and a later candidate wins a tie (>=): that is what
     * reproduces sentencepiece where two orders of the same pieces tie ("l" "ll" vs "ll" "l").
     * The slots are 8 bytes apart only to keep the layout simple.
     *
     * The lattice is built by end position: at each char boundary e the automaton gives the
     * pieces that end there, longest first, i.e. in the order of their starts; a piece that
     * starts inside a char is no edge. That is the order in which a pass over the starts
     * would offer them (each start offers its pieces, then the unknown char when no piece is
     * that char), so ties resolve the same way. */
    float *best = t->work;
    uint32_t *prevb = (uint32_t *)((int32_t *)t->work + c); /* 1 + previous boundary; 0: none */
    uint32_t *blen = (uint32_t *)((int32_t *)t->work + 2 * c);
    int32_t *bid = (int32_t *)t->work + 3 * c;
    const float unk_score = t->min_score - 10.0f;
    const tok_ac *ac = &t->match;
    for (size_t i = 0; i <= n; i++) blen[i] = prevb[i] = 0; /* 0 = unreached */
    for (size_t p = 0; p < n;) {
        uint32_t cp;
        size_t clen = (size_t)tok_utf8_next(s + p, n - p, &cp);
        prevb[p + clen] = (uint32_t)p + 1;
        p += clen;
    }
    best[0] = 0;
    int32_t st = 0;
    for (size_t e = 1; e <= n; e++) {
        st = tok_ac_step(ac, st, s[e - 1], &t->work_done);
        if (!prevb[e]) continue; /* inside a char */
        size_t pb = prevb[e] - 1;
        int has_single = 0;
        for (int32_t v = ac->out[st] >= 0 ? st : ac->dict[st]; v >= 0; v = ac->dict[v]) {
            t->work_done++;
            size_t l = ac->depth[v], p = e - l;
            if (p != 0 && !prevb[p]) continue; /* starts inside a char */
            int32_t id = ac->out[v];
            const tok_token *tk = &t->tokens[id];
            float sc = tk->type == TT_USER_DEFINED ? (float)l * t->max_score - 0.1f : tk->score;
            float cand = best[p] + sc;
            if (blen[e] == 0 || cand >= best[e]) {
                best[e] = cand;
                blen[e] = (uint32_t)l;
                bid[e] = id;
            }
            if (p == pb) has_single = 1;
        }
        if (!has_single) {
            float cand = best[pb] + unk_score;
            if (blen[e] == 0 || cand >= best[e]) {
                best[e] = cand;
                blen[e] = (uint32_t)(e - pb);
                bid[e] = -1;
            }
        }
    }
    /* Walk back from the end; the path's end positions go on a stack in best[]'s memory
     * (the scores are no longer needed), then emit in order. */
    uint32_t *stack = (uint32_t *)best;
    size_t depth = 0;
    for (size_t e = n; e > 0; e -= blen[e]) stack[depth++] = (uint32_t)e;
    int prev_unk = 0;
    size_t unk_from = 0;
    for (size_t k = depth; k-- > 0;) {
        size_t e = stack[k], b = e - blen[e];
        int32_t id = bid[e];
        if (id < 0) {
            /* runs of unknown chars become one unknown piece, as sentencepiece does */
            if (!prev_unk) unk_from = b;
            prev_unk = 1;
            if (k == 0 || bid[stack[k - 1]] >= 0) {
                emit_symbol(t, s + unk_from, (uint32_t)(e - unk_from), -1, out);
                prev_unk = 0;
            }
            continue;
        }
        prev_unk = 0;
        tok_emit(out, id);
    }
}
