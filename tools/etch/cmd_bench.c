/* etch bench FILE — time a method: load time, median/min/max of K executions after W warm-up
 * ones, peak RSS, and the time per operator (from the method's instruction observer). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_inputs.h"
#include "cli_util.h"
#include "commands.h"
#include "etch/kernels.h"
#include "etch/llm_runner.h"
#include "etch/module.h"

void cmd_bench_usage(FILE *out) {
    fprintf(out,
            "usage: etch bench FILE [options]\n"
            "\n"
            "Load a method of FILE once, execute it W times untimed and K times timed (each\n"
            "execute on its own, CLOCK_MONOTONIC), and print:\n"
            "  median X ms  min Y ms  max Z ms\n"
            "  load T ms                          (opening the program, starting the thread\n"
            "                                      pool, loading the method)\n"
            "  peak RSS N KiB                     (the process's, at the end)\n"
            "  threads N  kernels SET  isa ISA    (isa 'none' with portable kernels)\n"
            "then a table of operators, slowest first: operator, implementation (portable,\n"
            "optimized, custom or delegate; '+relu' etc. when an activation was fused into the\n"
            "call at load; '/8c' when it reads or writes channel-blocked tensors; '/chainN'\n"
            "when it runs the N kernel calls from it on as one, e.g. a 1x1 -> depthwise ->\n"
            "1x1 convolution block or a 4w linear (embedding_4bit -> permute_copy -> mm), and\n"
            "'/chained' on the calls it runs, whose time it holds; '/int' on a quantized\n"
            "operator (quantized_decomposed::*: integer data in or out), '/int4' on a chained\n"
            "run with a 4-bit weight (4w / 8da4w: one kernel from the packed weight), calls per\n"
            "run, time per\n"
            "run and share of the time, and a '(total)' row.\n"
            "An operator's time in a run is the time between the observer callbacks around\n"
            "each of its instructions, summed over the run; the table gives each row's median\n"
            "over the timed runs (one slow run does not move it), the total is the sum of the\n"
            "rows. Instructions that call no kernel (moves, jumps, frees, calls fused away)\n"
            "form the row '(other instructions)'. A time is printed in ms, µs or whole ns,\n"
            "the unit that keeps it at 1 or more (a short one never reads 0.000 ms).\n"
            "\n"
            "options:\n"
            "  --method NAME          method to time (default: forward)\n"
            "  --inputs A.npy,B.npy   one .npy per method input, in order (a non-tensor input\n"
            "                         takes a 0-d array). Default: generated tensors at the\n"
            "                         stored (upper-bound) shape: floats uniform in [-1, 1] from\n"
            "                         a fixed seed, integers 0..3, bools false; non-tensor\n"
            "                         inputs at their exported values\n"
            "  --data FILE.ptd        external tensor data\n"
            CLI_HELP_THREADS_KERNELS
            CLI_HELP_NO_FUSION
            "  --warmup W             untimed executions first (default 3)\n"
            "  --iterations K         timed executions (default 20)\n"
            "  --per-instruction      one row per instruction, in execution order (chain:pc),\n"
            "                         instead of one per operator, with the module path and\n"
            "                         graph node each comes from (the program's debug\n"
            "                         information, etch info --instructions) when it has them\n"
            "  --by-module            one row per module path (features.3.conv.1) instead of\n"
            "                         one per operator, slowest first; instructions without\n"
            "                         debug information form the row '(unknown module)'\n"
            "  --json                 print one JSON object instead: file, method, threads,\n"
            "                         kernels, isa, warmup, iterations, median_ms, min_ms,\n"
            "                         max_ms, load_ms, peak_rss_kb, ops: [{op, impl, fused\n"
            "                         (operator name or null), blocked (true when it reads or\n"
            "                         writes channel-blocked tensors), chained_calls (kernel\n"
            "                         calls it runs as one: 1 alone, 0 run by an earlier\n"
            "                         call), integer (\"int\", \"int4\" or null, as the\n"
            "                         table's /int, /int4), calls, ms_per_run (median over the runs),\n"
            "                         pct, times_ms (its time in each run); with\n"
            "                         --per-instruction also chain, pc; module and node: from\n"
            "                         the debug information, or null; with --by-module op is\n"
            "                         the module path and impl \"module\"}], ops_total_ms (the\n"
            "                         sum of the ms_per_run), times_ms (each timed execution,\n"
            "                         in order)\n"
            "  -h, --help             show this help\n"
            "\n"
            "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

typedef struct bench_opts {
    const char *path, *warmup_s, *iters_s;
    cli_module_args ma; /* --method, --inputs, --data, --cpu-threads, --kernels, --no-fusion */
    bool json, per_instruction, by_module;
    long long warmup, iterations;
} bench_opts;

static int parse_args(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_module_args_take("bench", argc, argv, &i, &o->ma)) ||
            (r = cli_opt_value("bench", argc, argv, &i, "--warmup", &o->warmup_s)) ||
            (r = cli_opt_value("bench", argc, argv, &i, "--iterations", &o->iters_s)) ||
            (r = cli_opt_flag("bench", argv, i, "--json", &o->json)) ||
            (r = cli_opt_flag("bench", argv, i, "--per-instruction", &o->per_instruction)) ||
            (r = cli_opt_flag("bench", argv, i, "--by-module", &o->by_module))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if ((r = cli_opt_file("bench", argc, argv, &i, &o->path)) < 0)
            return CLI_USAGE;
        if (r > 0)
            break;
    }
    if (!o->path)
        return cli_usage_error("bench", "missing FILE");
    if (o->per_instruction && o->by_module)
        return cli_usage_error("bench", "--per-instruction and --by-module exclude each other");
    if (!o->ma.method)
        o->ma.method = "forward";
    if (cli_module_args_finish("bench", &o->ma) != CLI_OK)
        return CLI_USAGE;
    o->warmup = 3;
    if (o->warmup_s && !cli_parse_long("bench", "--warmup", o->warmup_s, 0, 1000000, &o->warmup))
        return CLI_USAGE;
    o->iterations = 20;
    if (o->iters_s &&
        !cli_parse_long("bench", "--iterations", o->iters_s, 1, 1000000, &o->iterations))
        return CLI_USAGE;
    return CLI_OK;
}

/* ---- the per-operator profile --------------------------------------------------------------- */

typedef struct prof_row {
    const char *op;    /* operator or backend name */
    const char *impl;  /* "portable", "optimized", "custom", "delegate", "runtime" */
    const char *fused; /* fused operator, or NULL */
    bool blocked;      /* some argument is stored channel-blocked */
    uint32_t calls_run; /* kernel calls the instruction runs as one (chained calls; 0: it
                           is run by an earlier one) */
    int64_t ns;        /* in the current timed run */
    uint64_t calls;
    size_t chain, pc; /* the instruction (--per-instruction), or its first one */
    int64_t *runs;    /* [iterations] ns in each timed run (a slice of profile.runs) */
    double median_ms; /* over the timed runs */
    bool int4;        /* a chained run with an embedding_4bit call: an int4 weight's linear */
    const char *module; /* module path of the instruction (debug information), or NULL */
    const char *node;   /* its graph node (--per-instruction), or NULL */
} prof_row;

/* Everything the observer touches is allocated before the timed runs: it only indexes. */
typedef struct profile {
    size_t *chain_start; /* [nchains + 1] first flat index of each chain */
    size_t nchains;
    uint32_t *row_of;    /* [instructions] row of each instruction */
    prof_row *rows;
    size_t nrows;
    int64_t *runs;       /* [nrows * iterations] */
    int64_t last_ns;
    bool on;
} profile;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void observe(void *user_data, size_t chain, size_t pc, const char *op_name) {
    (void)op_name;
    profile *p = (profile *)user_data;
    int64_t now = mono_ns();
    if (p->on && chain < p->nchains && pc < p->chain_start[chain + 1] - p->chain_start[chain]) {
        prof_row *r = &p->rows[p->row_of[p->chain_start[chain] + pc]];
        r->ns += now - p->last_ns;
        r->calls++;
    }
    p->last_ns = now;
}

static bool same(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

static void profile_free(profile *p) {
    free(p->runs);
    free(p->chain_start);
    free(p->row_of);
    free(p->rows);
    memset(p, 0, sizeof *p);
}

/* The per-run times take rows x iterations values; beyond this, ask for fewer iterations. */
#define PROFILE_MAX_RUN_BYTES ((size_t)256 << 20)

static int profile_init(profile *p, const etch_method *m, bool per_instruction,
                        bool by_module, long long iterations) {
    memset(p, 0, sizeof *p);
    p->nchains = etch_method_num_chains(m);
    p->chain_start = calloc(p->nchains + 1, sizeof *p->chain_start);
    if (!p->chain_start)
        goto oom;
    for (size_t c = 0; c < p->nchains; c++)
        p->chain_start[c + 1] = p->chain_start[c] + etch_method_chain_length(m, c);
    size_t total = p->chain_start[p->nchains];
    p->row_of = calloc(total ? total : 1, sizeof *p->row_of);
    p->rows = calloc(total ? total : 1, sizeof *p->rows);
    if (!p->row_of || !p->rows)
        goto oom;
    for (size_t c = 0; c < p->nchains; c++) {
        for (size_t pc = 0; pc < p->chain_start[c + 1] - p->chain_start[c]; pc++) {
            etch_instruction_info info;
            etch_status st = etch_method_instruction_info(m, c, pc, &info);
            if (st != ETCH_OK) {
                profile_free(p);
                return cli_fail(st);
            }
            etch_instruction_debug dbg;
            if ((st = etch_method_instruction_debug(m, c, pc, &dbg)) != ETCH_OK) {
                profile_free(p);
                return cli_fail(st);
            }
            prof_row key = {info.op_name, info.impl, info.fused, info.blocked_args != 0,
                            info.chain, 0, 0, c, pc, NULL, 0, false, NULL, NULL};
            /* a call run by an earlier one keeps its row (marked), its time is that one's */
            if (!info.op_name || !info.impl || (info.skipped && info.chain != 0))
                key = (prof_row){"(other instructions)", "runtime", NULL, false, 1, 0, 0, c, pc,
                                 NULL, 0, false, NULL, NULL};
            key.module = dbg.module_path;
            key.node = dbg.node;
            if (by_module) /* one row per module: the time of everything computed in it */
                key = (prof_row){dbg.module_path ? (dbg.module_path[0] ? dbg.module_path
                                                                        : "<root>")
                                                 : "(unknown module)",
                                 "module", NULL, false, 1, 0, 0, c, pc, NULL, 0, false,
                                 dbg.module_path, NULL};
            /* the calls a chained run takes are the next ones marked chain 0 */
            for (size_t q = pc + 1, left = info.chain > 1 && !by_module ? info.chain - 1 : 0;
                 left && q < p->chain_start[c + 1] - p->chain_start[c]; q++) {
                etch_instruction_info qi;
                if (etch_method_instruction_info(m, c, q, &qi) != ETCH_OK || qi.chain != 0)
                    continue;
                left--;
                key.int4 |= qi.op_name &&
                            strncmp(qi.op_name, "quantized_decomposed::embedding_4bit", 36) == 0;
            }
            key.int4 |= !by_module && info.chain > 1 && info.op_name &&
                        strncmp(info.op_name, "quantized_decomposed::embedding_4bit", 36) == 0;
            size_t r = per_instruction ? p->nrows : 0;
            while (r < p->nrows && !(same(p->rows[r].op, key.op) &&
                                     same(p->rows[r].impl, key.impl) &&
                                     same(p->rows[r].fused, key.fused) &&
                                     p->rows[r].blocked == key.blocked &&
                                     p->rows[r].calls_run == key.calls_run &&
                                     p->rows[r].int4 == key.int4))
                r++;
            if (r == p->nrows)
                p->rows[p->nrows++] = key;
            p->row_of[p->chain_start[c] + pc] = (uint32_t)r;
        }
    }
    size_t iters = (size_t)iterations, nrows = p->nrows ? p->nrows : 1;
    if (nrows > PROFILE_MAX_RUN_BYTES / sizeof *p->runs / iters) {
        fprintf(stderr,
                "error: OutOfResources: the per-run times of %zu table rows over %lld "
                "iterations would take more than %zu MiB; give fewer --iterations\n",
                nrows, iterations, PROFILE_MAX_RUN_BYTES >> 20);
        profile_free(p);
        return CLI_FAIL;
    }
    if (!(p->runs = calloc(nrows * iters, sizeof *p->runs)))
        goto oom;
    for (size_t r = 0; r < p->nrows; r++)
        p->rows[r].runs = p->runs + r * iters;
    return CLI_OK;
oom:
    profile_free(p);
    fprintf(stderr, "error: MemoryAllocationFailed: out of memory\n");
    return CLI_FAIL;
}

static int by_time_desc(const void *a, const void *b) {
    const prof_row *x = (const prof_row *)a, *y = (const prof_row *)b;
    if (x->median_ms != y->median_ms)
        return x->median_ms < y->median_ms ? 1 : -1;
    return strcmp(x->op, y->op);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (n >= 1), sorting v. */
static double median_of(double *v, size_t n) {
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* After timed run k: file each row's time of the run. */
static void profile_end_run(profile *p, size_t k) {
    for (size_t r = 0; r < p->nrows; r++) {
        p->rows[r].runs[k] = p->rows[r].ns;
        p->rows[r].ns = 0;
    }
}

/* Each row's median over the n runs (scratch: n doubles); the sum of the medians. */
static double profile_medians(profile *p, size_t n, double *scratch) {
    double total = 0;
    for (size_t r = 0; r < p->nrows; r++) {
        for (size_t k = 0; k < n; k++)
            scratch[k] = (double)p->rows[r].runs[k] / 1e6;
        p->rows[r].median_ms = median_of(scratch, n);
        total += p->rows[r].median_ms;
    }
    return total;
}

/* A time in ms, e.g. "1.234 ms", "12.345 µs", "850 ns": a unit where the value is >= 1, so a
 * short time never reads 0.000 ("0 ns" only for a time of zero). */
static const char *time_str(char *buf, size_t cap, double ms) {
    if (ms >= 1.0)
        snprintf(buf, cap, "%.3f ms", ms);
    else if (ms >= 1e-3)
        snprintf(buf, cap, "%.3f µs", ms * 1e3);
    else
        snprintf(buf, cap, "%.0f ns", ms * 1e6);
    return buf;
}

/* The integer kernel a row runs: "int4" for a chained run with an int4 weight (4w / 8da4w:
 * embedding_4bit -> ... -> mm, one kernel from the packed weight), "int" for any other
 * quantized_decomposed operator (integer tensors in or out); NULL for a float one. */
static const char *integer_kind(const prof_row *row) {
    static const char q[] = "quantized_decomposed::";
    if (!row->op || strncmp(row->op, q, sizeof q - 1) != 0)
        return NULL;
    return row->calls_run > 1 && row->int4 ? "int4" : "int";
}

/* "aten::relu.out" -> "relu" (for the impl column). */
static void short_op(const char *name, char *buf, size_t cap) {
    const char *s = strstr(name, "::");
    s = s ? s + 2 : name;
    size_t n = strcspn(s, ".");
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
}

/* ---- output ---------------------------------------------------------------------------- */

typedef struct bench_result {
    const double *times; /* [iterations] in execution order */
    double median, min, max, load_ms;
    double ops_total_ms; /* the sum of the rows' medians */
    long peak_rss_kb;
    const char *isa;
} bench_result;

static void print_human(const bench_opts *o, const bench_result *r, const profile *p) {
    char t1[32], t2[32], t3[32];
    printf("median %s  min %s  max %s\n", time_str(t1, sizeof t1, r->median),
           time_str(t2, sizeof t2, r->min), time_str(t3, sizeof t3, r->max));
    printf("load %s\n", time_str(t1, sizeof t1, r->load_ms));
    printf("peak RSS %ld KiB\n", r->peak_rss_kb);
    printf("threads %d  kernels %s  isa %s\n", o->ma.num_threads,
           etch_module_kernels_name(o->ma.kernels), r->isa);
    double total = r->ops_total_ms;
    printf("\n%s%-36s %-28s %9s %12s %7s%s\n", o->per_instruction ? "chain:pc   " : "",
           o->by_module ? "module" : "operator", "impl", "calls/run", "time/run", "%",
           o->per_instruction ? "  module (node)" : "");
    for (size_t i = 0; i < p->nrows; i++) {
        const prof_row *row = &p->rows[i];
        char impl[128], fused[48], chained[24];
        fused[0] = chained[0] = 0;
        if (row->fused) {
            fused[0] = '+';
            short_op(row->fused, fused + 1, sizeof fused - 1);
        }
        if (row->calls_run > 1)
            snprintf(chained, sizeof chained, "/chain%u", (unsigned)row->calls_run);
        else if (row->calls_run == 0)
            snprintf(chained, sizeof chained, "/chained");
        const char *ik = integer_kind(row);
        snprintf(impl, sizeof impl, "%s%s%s%s%s%s", row->impl, fused, row->blocked ? "/8c" : "",
                 chained, ik ? "/" : "", ik ? ik : "");
        if (o->per_instruction) {
            char at[32];
            snprintf(at, sizeof at, "%zu:%zu", row->chain, row->pc);
            printf("%-10s ", at);
        }
        printf("%-36s %-28s %9.4g %12s %7.2f", cli_safe(row->op), impl,
               (double)row->calls / (double)o->iterations,
               time_str(t1, sizeof t1, row->median_ms),
               total > 0 ? 100.0 * row->median_ms / total : 0.0);
        if (o->per_instruction && (row->module || row->node)) {
            fputs("  ", stdout);
            fputs(cli_safe(row->module ? (row->module[0] ? row->module : "<root>") : "?"), stdout);
            if (row->node) {
                fputs(" (", stdout);
                fputs(cli_safe(row->node), stdout);
                putchar(')');
            }
        }
        putchar('\n');
    }
    printf("%s%-36s %-28s %9s %12s %7.2f\n", o->per_instruction ? "           " : "", "(total)",
           "", "", time_str(t1, sizeof t1, total), total > 0 ? 100.0 : 0.0);
}

static void print_json(const bench_opts *o, const char *method, const bench_result *r,
                       const profile *p) {
    double total = r->ops_total_ms;
    fputs("{\"file\": ", stdout);
    cli_json_string(stdout, o->path);
    fputs(", \"method\": ", stdout);
    cli_json_string(stdout, method);
    printf(", \"threads\": %d, \"kernels\": \"%s\", \"isa\": \"%s\", \"warmup\": %lld, "
           "\"iterations\": %lld, \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
           "\"load_ms\": %.6f, \"peak_rss_kb\": %ld, \"ops\": [",
           o->ma.num_threads, etch_module_kernels_name(o->ma.kernels), r->isa, o->warmup,
           o->iterations, r->median, r->min, r->max, r->load_ms, r->peak_rss_kb);
    for (size_t i = 0; i < p->nrows; i++) {
        const prof_row *row = &p->rows[i];
        fputs(i ? ", {\"op\": " : "{\"op\": ", stdout);
        cli_json_string(stdout, row->op);
        fputs(", \"impl\": ", stdout);
        cli_json_string(stdout, row->impl);
        fputs(", \"fused\": ", stdout);
        cli_json_string(stdout, row->fused);
        printf(", \"blocked\": %s, \"chained_calls\": %u", row->blocked ? "true" : "false",
               (unsigned)row->calls_run);
        fputs(", \"integer\": ", stdout);
        cli_json_string(stdout, integer_kind(row));
        if (o->per_instruction) {
            printf(", \"chain\": %zu, \"pc\": %zu, \"module\": ", row->chain, row->pc);
            cli_json_string(stdout, row->module);
            fputs(", \"node\": ", stdout);
            cli_json_string(stdout, row->node);
        }
        printf(", \"calls\": %.6g, \"ms_per_run\": %.6f, \"pct\": %.4f, \"times_ms\": [",
               (double)row->calls / (double)o->iterations, row->median_ms,
               total > 0 ? 100.0 * row->median_ms / total : 0.0);
        for (long long k = 0; k < o->iterations; k++)
            printf(k ? ", %.6f" : "%.6f", (double)row->runs[k] / 1e6);
        fputs("]}", stdout);
    }
    printf("], \"ops_total_ms\": %.6f, \"times_ms\": [", total);
    for (long long k = 0; k < o->iterations; k++)
        printf(k ? ", %.6f" : "%.6f", r->times[k]);
    fputs("]}\n", stdout);
}

/* ---- the command ------------------------------------------------------------------------- */

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != CLI_OK)
        return rc;
    etch_module *mod = NULL;
    cli_inputs *in = calloc(1, sizeof *in);
    double *times = malloc(2 * (size_t)o.iterations * sizeof *times); /* + a sorted copy */
    profile prof;
    memset(&prof, 0, sizeof prof);
    if (!in || !times) {
        free(in);
        free(times);
        fprintf(stderr, "error: MemoryAllocationFailed: out of memory\n");
        return CLI_FAIL;
    }
    etch_module_options mo = cli_module_args_options(&o.ma);
    etch_method *m = NULL;
    double t0 = cli_now_ms();
    etch_status st = etch_module_open(o.path, &mo, &mod);
    if (st != ETCH_OK) {
        rc = cli_fail(st);
        goto done;
    }
    if ((rc = cli_module_load_method(mod, o.ma.method, &o.ma, &m)) != CLI_OK)
        goto done;
    double load_ms = cli_now_ms() - t0;
    if ((rc = cli_inputs_set(in, "bench", o.ma.inputs, CLI_FILL_RANDOM, m)) != CLI_OK)
        goto done;
    if ((rc = profile_init(&prof, m, o.per_instruction, o.by_module, o.iterations)) != CLI_OK)
        goto done;
    etch_method_set_observer(m, observe, &prof);
    for (long long k = 0; k < o.warmup + o.iterations; k++) {
        prof.on = k >= o.warmup;
        double a = cli_now_ms();
        prof.last_ns = mono_ns();
        st = etch_method_execute(m);
        double dt = cli_now_ms() - a;
        if (st != ETCH_OK) {
            rc = cli_fail_ctx(st, "%s %lld", k < o.warmup ? "warm-up execution" : "execution",
                              k < o.warmup ? k + 1 : k - o.warmup + 1);
            goto done;
        }
        if (k >= o.warmup) {
            times[k - o.warmup] = dt;
            profile_end_run(&prof, (size_t)(k - o.warmup));
        }
    }
    etch_method_set_observer(m, NULL, NULL);

    bench_result r;
    memset(&r, 0, sizeof r);
    size_t n = (size_t)o.iterations;
    double *sorted = times + n;
    memcpy(sorted, times, n * sizeof *times);
    r.times = times;
    r.median = median_of(sorted, n);
    r.min = sorted[0];
    r.max = sorted[n - 1];
    r.ops_total_ms = profile_medians(&prof, n, sorted);
    r.load_ms = load_ms;
    /* VmHWM (getrusage's ru_maxrss survives execve, so it can be the parent's peak) */
    r.peak_rss_kb = (long)(etch_llm_peak_rss_bytes() / 1024u);
    r.isa = o.ma.kernels == ETCH_MODULE_KERNELS_OPTIMIZED ? etch_isa_name(etch_isa_active())
                                                       : "none";
    if (!o.per_instruction)
        qsort(prof.rows, prof.nrows, sizeof *prof.rows, by_time_desc);
    if (o.json)
        print_json(&o, o.ma.method, &r, &prof);
    else
        print_human(&o, &r, &prof);
    fflush(stdout);
    rc = CLI_OK;
done:
    etch_module_close(mod); /* before the inputs it borrows */
    cli_inputs_free(in);
    free(in);
    free(times);
    profile_free(&prof);
    return rc;
}
