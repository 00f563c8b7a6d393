/*
 * Greedy ids of an exported program through the LLM runner's C API, for tests/llm_hf:
 *   hf_ids MODEL.pte TOKENIZER PROMPT_IDS N
 * PROMPT_IDS comma-separated; BOS is not added (the prompt has it where the model wants it);
 * EOS ids are ignored, so exactly N ids are generated. Prints the metadata line
 * "vocab V context C bos B eos E1,E2,..." and then the N generated ids, comma-separated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <etch/llm.h>

#define MAX_IDS 4096

typedef struct collect {
    int32_t ids[MAX_IDS];
    size_t n;
} collect;

static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    collect *c = (collect *)ud;
    (void)text;
    (void)len;
    if (id >= 0 && c->n < MAX_IDS) c->ids[c->n++] = id;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: hf_ids MODEL.pte TOKENIZER PROMPT_IDS N\n");
        return 2;
    }
    static int32_t prompt[MAX_IDS];
    size_t np = 0;
    for (char *s = argv[3], *end; *s; s = end + (*end == ',')) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || np == MAX_IDS) {
            fprintf(stderr, "hf_ids: bad prompt ids '%s'\n", argv[3]);
            return 2;
        }
        prompt[np++] = (int32_t)v;
    }
    char *end;
    long n = strtol(argv[4], &end, 10);
    if (*end || n < 0 || n >= MAX_IDS) {
        fprintf(stderr, "hf_ids: bad token count '%s'\n", argv[4]);
        return 2;
    }
    etch_tokenizer *tok = NULL;
    etch_llm_runner *r = NULL;
    if (etch_tokenizer_open_file(argv[2], NULL, &tok) != ETCH_OK) {
        fprintf(stderr, "hf_ids: %s\n", etch_last_error());
        return 1;
    }
    etch_llm_runner_options o = etch_llm_runner_default_options();
    o.sampler.temperature = 0;
    if (etch_llm_runner_open(argv[1], tok, &o, &r) != ETCH_OK) {
        fprintf(stderr, "hf_ids: %s\n", etch_last_error());
        etch_tokenizer_close(tok);
        return 1;
    }
    const etch_llm_metadata *md = etch_llm_runner_metadata(r);
    printf("vocab %lld context %lld bos %lld eos ", (long long)md->vocab_size,
           (long long)md->max_context_len, (long long)md->bos_id);
    for (size_t i = 0; i < md->n_eos_ids; i++)
        printf("%s%lld", i ? "," : "", (long long)md->eos_ids[i]);
    printf("\n");
    static collect c;
    etch_llm_generate_params gp = etch_llm_generate_default_params();
    gp.max_new_tokens = (int32_t)n;
    gp.ignore_eos = true;
    gp.add_bos = false;
    gp.on_token = on_token;
    gp.user_data = &c;
    etch_llm_result res;
    etch_status st = etch_llm_runner_generate_ids(r, prompt, np, &gp, &res);
    if (st != ETCH_OK) {
        fprintf(stderr, "hf_ids: %s\n", etch_last_error());
    } else {
        for (size_t i = 0; i < c.n; i++)
            printf("%s%d", i ? "," : "", (int)c.ids[i]);
        printf("\n");
    }
    etch_llm_runner_close(r);
    etch_tokenizer_close(tok);
    return st == ETCH_OK ? 0 : 1;
}
