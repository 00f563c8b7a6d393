/* Aho-Corasick automata over token strings, built once at open: every piece that occurs in a
 * text is found in one pass, O(text + matches), however long the pieces are. The unigram
 * lattice, sentencepiece BPE's user-defined pieces and the special tokens use it; looking up
 * each candidate length at each position instead costs O(n * L^2) for a piece of L bytes.
 *
 * Nodes are the prefixes of the pieces (node 0 is the empty one); a child is found through a
 * hash of (parent, byte) whose slots hold the child, checked against its parent and byte. The
 * root's 256 transitions are a plain table. */
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"
#include "runtime/error.h"

static uint32_t edge_hash(int32_t parent, uint8_t b) {
    uint64_t k = ((uint64_t)(uint32_t)parent << 8 | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32);
}

static int32_t child_of(const tok_ac *ac, int32_t node, uint8_t b) {
    if (node == 0) return ac->root[b];
    uint32_t i = edge_hash(node, b) & ac->mask;
    for (;;) {
        uint32_t v = ac->slots[i];
        if (v == 0) return -1;
        int32_t c = (int32_t)v - 1;
        if (ac->parent[c] == node && ac->byte[c] == b) return c;
        i = (i + 1) & ac->mask;
    }
}

static void add_child(tok_ac *ac, int32_t node, uint8_t b, int32_t c) {
    ac->parent[c] = node;
    ac->byte[c] = b;
    if (node == 0) {
        ac->root[b] = c;
        return;
    }
    uint32_t i = edge_hash(node, b) & ac->mask;
    while (ac->slots[i]) i = (i + 1) & ac->mask;
    ac->slots[i] = (uint32_t)c + 1;
}

int32_t tok_ac_step(const tok_ac *ac, int32_t state, uint8_t b, uint64_t *work) {
    for (;;) {
        int32_t c = child_of(ac, state, b);
        (*work)++;
        if (c >= 0) return c;
        if (state == 0) return 0;
        state = ac->fail[state];
    }
}

etch_status tok_ac_build(etch_tokenizer *t, tok_ac *ac, const int32_t *ids, int32_t n_ids) {
    memset(ac, 0, sizeof *ac);
    size_t total = 1;
    for (int32_t k = 0; k < n_ids; k++) total += t->tokens[ids[k]].len;
    if (total > (size_t)INT32_MAX / 2)
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "tokenizer: %zu bytes of pieces", total);
    uint32_t cap = 16;
    while (cap < 2 * total + 1) cap <<= 1;
    size_t nn = total;
    ac->parent = tok_arena_alloc(&t->arena, nn * sizeof(int32_t));
    ac->fail = tok_arena_alloc(&t->arena, nn * sizeof(int32_t));
    ac->dict = tok_arena_alloc(&t->arena, nn * sizeof(int32_t));
    ac->out = tok_arena_alloc(&t->arena, nn * sizeof(int32_t));
    ac->depth = tok_arena_alloc(&t->arena, nn * sizeof(uint32_t));
    ac->byte = tok_arena_alloc(&t->arena, nn);
    ac->slots = tok_arena_alloc(&t->arena, (size_t)cap * sizeof(uint32_t));
    uint32_t *order = malloc(nn * sizeof(uint32_t));
    if (!ac->parent || !ac->fail || !ac->dict || !ac->out || !ac->depth || !ac->byte ||
        !ac->slots || !order) {
        free(order);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                        "tokenizer: out of memory for a %zu-node piece automaton", total);
    }
    ac->mask = cap - 1;
    for (int i = 0; i < 256; i++) ac->root[i] = -1;
    ac->parent[0] = -1;
    ac->out[0] = -1;
    ac->dict[0] = -1;
    int32_t n = 1;
    uint32_t max_depth = 0;
    for (int32_t k = 0; k < n_ids; k++) {
        const uint8_t *s = tok_text(t, ids[k]);
        uint32_t len = t->tokens[ids[k]].len;
        int32_t node = 0;
        for (uint32_t i = 0; i < len; i++) {
            int32_t c = child_of(ac, node, s[i]);
            if (c < 0) {
                c = n++;
                add_child(ac, node, s[i], c);
                ac->out[c] = -1;
                ac->depth[c] = i + 1;
            }
            node = c;
        }
        if (len > max_depth) max_depth = len;
        if (node > 0 && ac->out[node] < 0) ac->out[node] = ids[k]; /* the first id wins */
    }
    ac->n_nodes = n;
    /* breadth-first order (a counting sort by depth): a node's fail link is shallower */
    uint32_t *count = calloc((size_t)max_depth + 2, sizeof(uint32_t));
    if (!count) {
        free(order);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory");
    }
    for (int32_t v = 0; v < n; v++) count[ac->depth[v] + 1]++;
    for (uint32_t d = 1; d <= max_depth + 1; d++) count[d] += count[d - 1];
    for (int32_t v = 0; v < n; v++) order[count[ac->depth[v]]++] = (uint32_t)v;
    free(count);
    uint64_t work = 0;
    for (int32_t k = 1; k < n; k++) {
        int32_t v = (int32_t)order[k], u = ac->parent[v];
        int32_t f = u == 0 ? 0 : tok_ac_step(ac, ac->fail[u], ac->byte[v], &work);
        ac->fail[v] = f;
        ac->dict[v] = ac->out[f] >= 0 ? f : ac->dict[f];
    }
    free(order);
    return ETCH_OK;
}
