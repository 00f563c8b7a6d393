/* etch llm --models: parsing the variants and the budget flags, replaying a thermal trace,
 * and asking etch/policy.h which variant serves each request. */
#define _POSIX_C_SOURCE 200809L /* getline, strdup */
#include "llm_policy.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_util.h"
#include "etch/policy.h"

typedef struct trace_line {
    double thermal, battery;
    int64_t t_ms; /* -1: none */
    uint64_t memory;
} trace_line;

struct llm_policy {
    char *spec; /* a copy of --models, cut into the paths */
    size_t n;
    const char *model[LLM_POLICY_MAX_VARIANTS], *tok[LLM_POLICY_MAX_VARIANTS];
    char name[LLM_POLICY_MAX_VARIANTS][ETCH_POLICY_MAX_NAME + 1];
    etch_policy *p;
    double budget;
    int64_t cooldown;
    trace_line *lines;
    size_t n_lines;
    bool timed, quiet;
    size_t requests;
    int64_t t0_us, now_ms;
};

/* Cut --models into variants (spec is modified). CLI_OK or CLI_USAGE. */
static int split_models(char *spec, const char *dflt_tok, llm_policy *lp) {
    lp->n = 0;
    char *s = spec;
    for (;;) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = 0;
        if (lp->n == LLM_POLICY_MAX_VARIANTS)
            return cli_usage_error("llm", "--models: at most %d variants",
                                   LLM_POLICY_MAX_VARIANTS);
        char *colon = strchr(s, ':');
        if (colon)
            *colon = 0;
        if (!*s)
            return cli_usage_error("llm", "--models: variant %zu has no model path",
                                   lp->n + 1);
        if (colon && !colon[1])
            return cli_usage_error("llm", "--models: variant %zu ('%s') has an empty "
                                          "tokenizer after ':'",
                                   lp->n + 1, s);
        const char *tok = colon ? colon + 1 : dflt_tok;
        if (!tok)
            return cli_usage_error("llm", "--models: variant %zu ('%s') has no tokenizer: "
                                          "write it as MODEL:TOKENIZER or give --tokenizer",
                                   lp->n + 1, s);
        lp->model[lp->n] = s;
        lp->tok[lp->n] = tok;
        lp->n++;
        if (!comma)
            break;
        s = comma + 1;
    }
    return CLI_OK;
}

static int parse_numbers(const llm_policy_flags *f, llm_policy *lp) {
    lp->budget = 0;
    lp->cooldown = etch_policy_default_config().cooldown_ms;
    if (f->latency_budget &&
        !cli_parse_double("llm", "--latency-budget-ms", f->latency_budget, 0.0, 1e12,
                          &lp->budget))
        return CLI_USAGE;
    long long cd;
    if (f->cooldown) {
        if (!cli_parse_long("llm", "--cooldown-ms", f->cooldown, 0, INT64_MAX / 4, &cd))
            return CLI_USAGE;
        lp->cooldown = cd;
    }
    return CLI_OK;
}

int llm_policy_check(const llm_policy_flags *f) {
    if (!f->models) {
        const char *which = f->latency_budget ? "--latency-budget-ms"
                            : f->cooldown     ? "--cooldown-ms"
                            : f->trace        ? "--thermal-trace"
                                              : NULL;
        if (which)
            return cli_usage_error("llm", "%s needs --models", which);
        return CLI_OK;
    }
    llm_policy lp;
    memset(&lp, 0, sizeof lp);
    char *spec = strdup(f->models);
    if (!spec) {
        fputs("error: MemoryAllocationFailed: out of memory\n", stderr);
        return CLI_FAIL;
    }
    int rc = split_models(spec, f->tokenizer, &lp);
    free(spec);
    if (rc == CLI_OK)
        rc = parse_numbers(f, &lp);
    return rc;
}

/* ---- the trace ---------------------------------------------------------------------------- */

static int trace_error(const char *path, size_t lineno, const char *what, const char *tok) {
    fprintf(stderr, "error: InvalidArgument: %s:%zu: %s '%s'\n", path, lineno, what, tok);
    return CLI_FAIL;
}

static bool parse_num(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v))
        return false;
    *out = v;
    return true;
}

static int read_trace(llm_policy *lp, const char *path) {
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "error: AccessFailed: %s: %s\n", path, strerror(errno));
        return CLI_FAIL;
    }
    char *line = NULL;
    size_t cap = 0, cap_lines = 0, with_t = 0;
    trace_line cur = {0.0, 1.0, -1, 0};
    int rc = CLI_OK;
    ssize_t len;
    for (size_t lineno = 1; rc == CLI_OK && (len = getline(&line, &cap, fp)) >= 0; lineno++) {
        if (memchr(line, 0, (size_t)len)) {
            rc = trace_error(path, lineno, "a NUL byte in", "the line");
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        int positional = 0;
        bool any = false;
        cur.t_ms = -1;
        for (char *tok = strtok(line, " \t\r\n"); tok && rc == CLI_OK;
             tok = strtok(NULL, " \t\r\n")) {
            any = true;
            char *eq = strchr(tok, '=');
            const char *key = eq ? tok : positional == 0 ? "thermal" : "battery";
            const char *val = eq ? eq + 1 : tok;
            if (eq)
                *eq = 0;
            else if (positional++ >= 2) {
                rc = trace_error(path, lineno, "a third plain field (THERMAL BATTERY, then "
                                               "key=value):",
                                 tok);
                break;
            }
            double v;
            if (!parse_num(val, &v)) {
                rc = trace_error(path, lineno, "not a number:", val);
            } else if (strcmp(key, "thermal") == 0) {
                if (!(v >= 0 && v <= ETCH_POLICY_THERMAL_MAX))
                    rc = trace_error(path, lineno, "thermal is not in [0, 4]:", val);
                cur.thermal = v;
            } else if (strcmp(key, "battery") == 0) {
                if (!(v >= 0 && v <= 1))
                    rc = trace_error(path, lineno, "battery is not in [0, 1]:", val);
                cur.battery = v;
            } else if (strcmp(key, "t") == 0) {
                if (!(v >= 0 && v <= 9e15 && v == floor(v)))
                    rc = trace_error(path, lineno, "t is not a whole number of ms >= 0:", val);
                else if (lp->n_lines && lp->lines[lp->n_lines - 1].t_ms > (int64_t)v)
                    rc = trace_error(path, lineno, "t goes back in time:", val);
                cur.t_ms = (int64_t)v;
            } else if (strcmp(key, "memory") == 0) {
                if (!(v >= 0 && v <= 1.8e19 && v == floor(v)))
                    rc = trace_error(path, lineno, "memory is not a whole number of bytes:",
                                     val);
                cur.memory = (uint64_t)v;
            } else {
                rc = trace_error(path, lineno,
                                 "unknown key (thermal, battery, t, memory):", key);
            }
        }
        if (rc != CLI_OK || !any)
            continue;
        if (lp->n_lines == cap_lines) {
            size_t nc = cap_lines ? 2 * cap_lines : 64;
            trace_line *p = realloc(lp->lines, nc * sizeof *p);
            if (!p) {
                fputs("error: MemoryAllocationFailed: out of memory\n", stderr);
                rc = CLI_FAIL;
                break;
            }
            lp->lines = p;
            cap_lines = nc;
        }
        lp->lines[lp->n_lines++] = cur;
        with_t += cur.t_ms >= 0;
    }
    free(line);
    if (rc == CLI_OK && ferror(fp)) {
        fprintf(stderr, "error: AccessFailed: %s: read error\n", path);
        rc = CLI_FAIL;
    }
    fclose(fp);
    if (rc == CLI_OK && lp->n_lines == 0) {
        fprintf(stderr, "error: InvalidArgument: %s: no requests (every line is empty)\n", path);
        rc = CLI_FAIL;
    }
    if (rc == CLI_OK && with_t && with_t != lp->n_lines) {
        fprintf(stderr, "error: InvalidArgument: %s: %zu of %zu lines give t=: give it on "
                        "every line or on none\n",
                path, with_t, lp->n_lines);
        rc = CLI_FAIL;
    }
    lp->timed = with_t > 0;
    return rc;
}

/* ---- the policy --------------------------------------------------------------------------- */

static void make_name(llm_policy *lp, size_t i) {
    const char *path = lp->model[i], *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t len = strlen(base);
    if (len > 4 && strcmp(base + len - 4, ".pte") == 0)
        len -= 4;
    if (len == 0) {
        base = path;
        len = strlen(path);
    }
    if (len > ETCH_POLICY_MAX_NAME - 4)
        len = ETCH_POLICY_MAX_NAME - 4;
    memcpy(lp->name[i], base, len);
    lp->name[i][len] = 0;
    for (size_t j = 0; j < i; j++)
        if (strcmp(lp->name[j], lp->name[i]) == 0) {
            snprintf(lp->name[i] + len, 5, "#%zu", i + 1 < 1000 ? i + 1 : 999);
            break;
        }
}

int llm_policy_open(const llm_policy_flags *f, bool quiet, llm_policy **out) {
    llm_policy *lp = calloc(1, sizeof *lp);
    if (!lp || !(lp->spec = strdup(f->models))) {
        free(lp);
        fputs("error: MemoryAllocationFailed: out of memory\n", stderr);
        return CLI_FAIL;
    }
    lp->quiet = quiet;
    int rc = split_models(lp->spec, f->tokenizer, lp);
    if (rc == CLI_OK)
        rc = parse_numbers(f, lp);
    if (rc == CLI_OK && f->trace)
        rc = read_trace(lp, f->trace);
    etch_policy_variant v[LLM_POLICY_MAX_VARIANTS];
    for (size_t i = 0; rc == CLI_OK && i < lp->n; i++) {
        struct stat sb;
        if (stat(lp->model[i], &sb) != 0) {
            fprintf(stderr, "error: AccessFailed: %s: %s\n", lp->model[i], strerror(errno));
            rc = CLI_FAIL;
            break;
        }
        make_name(lp, i);
        memset(&v[i], 0, sizeof v[i]);
        v[i].name = lp->name[i];
        v[i].cost_ms_per_token = 0; /* unknown until measured */
        v[i].memory_bytes = sb.st_size > 0 ? (uint64_t)sb.st_size : 1;
        v[i].quality = (int)(lp->n - i); /* best first */
    }
    if (rc == CLI_OK) {
        etch_policy_config c = etch_policy_default_config();
        c.cooldown_ms = lp->cooldown;
        etch_status st = etch_policy_create(v, lp->n, &c, &lp->p);
        if (st != ETCH_OK)
            rc = cli_fail(st);
    }
    if (rc != CLI_OK) {
        llm_policy_close(lp);
        return rc;
    }
    if (!quiet) {
        fputs("policy: variants, best first:", stderr);
        for (size_t i = 0; i < lp->n; i++)
            fprintf(stderr, "%s '%s' (%llu bytes)", i ? "," : "", lp->name[i],
                    (unsigned long long)v[i].memory_bytes);
        if (lp->budget > 0)
            fprintf(stderr, "; latency budget %g ms per token", lp->budget);
        else
            fputs("; no latency budget", stderr);
        fprintf(stderr, "; cool-down %lld ms", (long long)lp->cooldown);
        if (f->trace)
            fprintf(stderr, "; trace %s (%zu lines%s)", f->trace, lp->n_lines,
                    lp->timed ? ", timed" : "");
        fputc('\n', stderr);
    }
    lp->t0_us = etch_llm_time_us();
    *out = lp;
    return CLI_OK;
}

void llm_policy_close(llm_policy *lp) {
    if (!lp)
        return;
    etch_policy_destroy(lp->p);
    free(lp->lines);
    free(lp->spec);
    free(lp);
}

size_t llm_policy_count(const llm_policy *lp) { return lp->n; }
const char *llm_policy_model(const llm_policy *lp, size_t i) { return lp->model[i]; }
const char *llm_policy_tokenizer(const llm_policy *lp, size_t i) { return lp->tok[i]; }

static int64_t clock_ms(const llm_policy *lp) {
    return (etch_llm_time_us() - lp->t0_us) / 1000;
}

int llm_policy_before(llm_policy *lp, size_t *variant) {
    etch_policy_signals s = etch_policy_default_signals();
    const trace_line *tl = NULL;
    if (lp->n_lines)
        tl = &lp->lines[lp->requests < lp->n_lines ? lp->requests : lp->n_lines - 1];
    lp->now_ms = tl && lp->timed ? tl->t_ms : clock_ms(lp);
    s.now_ms = lp->now_ms;
    s.latency_budget_ms = lp->budget;
    s.tokens = 1;
    if (tl) {
        s.thermal = tl->thermal;
        s.battery = tl->battery;
        s.memory_ceiling_bytes = tl->memory;
    }
    etch_policy_decision d;
    etch_status st = etch_policy_choose(lp->p, &s, &d);
    if (st != ETCH_OK)
        return cli_fail_ctx(st, "request %zu", lp->requests + 1);
    lp->requests++;
    if (!lp->quiet) {
        fflush(stdout);
        fprintf(stderr, "policy: request %zu -> '%s' [%s] %s\n", lp->requests,
                lp->name[d.index], etch_policy_reason_str(d.reason), d.text);
    }
    *variant = d.index;
    return CLI_OK;
}

void llm_policy_after(llm_policy *lp, size_t variant, const etch_llm_stats *st) {
    int64_t decode = st->inference_end_us - st->prompt_eval_end_us;
    if (st->generated_tokens <= 0 || decode <= 0)
        return; /* nothing measured */
    double ms = (double)decode / 1e3 / (double)st->generated_tokens;
    int64_t now = lp->timed ? lp->now_ms : clock_ms(lp);
    /* a measurement the policy refuses (it never is: the values are checked) changes nothing */
    (void)etch_policy_observe(lp->p, variant, now, ms);
}
