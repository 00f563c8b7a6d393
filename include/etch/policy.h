/*
 * etch/policy.h — choosing a model variant per request under a budget (libc only).
 *
 * An app ships several variants of one model (say an 8-bit larger one and a 4-bit small
 * one). Before each request it reads the platform (thermal state, battery, free memory) and
 * asks the policy which variant to run; after the request it reports the latency it saw:
 *
 *   etch_policy_variant v[2] = {
 *       {.name = "large-q8", .cost_ms_per_token = 40, .memory_bytes = 900u << 20, .quality = 2},
 *       {.name = "small-q4", .cost_ms_per_token = 15, .memory_bytes = 300u << 20, .quality = 1},
 *   };
 *   etch_policy *p;
 *   etch_policy_create(v, 2, NULL, &p);             // NULL: etch_policy_default_config()
 *   ...
 *   etch_policy_signals s = etch_policy_default_signals();
 *   s.now_ms = monotonic_ms(); s.latency_budget_ms = 50; s.tokens = 1;
 *   s.thermal = 2; s.battery = 0.64; s.memory_ceiling_bytes = free_bytes;
 *   etch_policy_decision d;
 *   if (etch_policy_choose(p, &s, &d) == ETCH_OK) {
 *       run(v[d.index]); log("%s", d.text);        // e.g. "thermal 3 >= 3: stepped down ..."
 *       etch_policy_observe(p, d.index, monotonic_ms(), measured_ms_per_token);
 *   }
 *   etch_policy_destroy(p);
 *
 * The variants form a ladder by quality (higher rank first). The rules, per request:
 *
 *  1. Memory (hard): a variant whose footprint exceeds the ceiling is never chosen. When the
 *     current one does not fit, the policy moves at once to the best fitting variant below it
 *     (or, when none below fits, the best fitting one). When no variant fits at all, it
 *     chooses the one with the smallest footprint, returns ETCH_OK with fits = false and
 *     reason ETCH_POLICY_REASON_NOTHING_FITS: the app decides whether to run it.
 *  2. Thermal: thermal >= config.thermal_down steps down one level (every request while it
 *     stays there, to the bottom of the ladder).
 *  3. Battery: battery < config.battery_down steps down one level (likewise).
 *  4. Latency: when the current variant's predicted latency exceeds the budget, the policy
 *     moves at once to the best variant below it predicted within the budget (else to the one
 *     predicted fastest, if that is faster than the current).
 *     The first rule that applies decides (one move per request).
 *  5. Otherwise, stepping back up one level needs the request to be comfortable: thermal <=
 *     config.thermal_up, battery >= config.battery_up, the next better variant's footprint at
 *     most (1 - memory_margin) of the ceiling and its predicted latency at most
 *     (1 - latency_margin) of the budget; and every request for config.cooldown_ms (by the
 *     caller's clock) to have been comfortable, with no move in that time either. Between the
 *     down and up levels the policy holds. So moves down are immediate, moves up never come
 *     sooner than cooldown_ms after the previous move, and climb one level per cool-down.
 *
 * The first request chooses the best variant that fits the memory ceiling and is predicted
 * within the budget (rules 2 and 3 may then step it down); it counts as a move for the
 * cool-down.
 *
 * Latency prediction: predicted = cost_ms_per_request + estimate_ms_per_token * tokens. The
 * estimate is the variant's prior (cost_ms_per_token) until etch_policy_observe reports a
 * measurement; from then on an exponentially weighted moving average of the measurements
 * (weight config.ewma_alpha for the newest). A variant not measured for a while (one that was
 * stepped away from, say while the phone was hot) relaxes back toward its prior with the
 * half-life config.stale_half_life_ms, so that it can be tried again. A prior of 0 means
 * "unknown": predicted as free (within any budget) until measured.
 *
 * The policy does no I/O and never reads a clock: all times are the caller's monotonic
 * milliseconds, so a replayed trace decides the same way every time. Not thread-safe: one
 * policy per thread (or a lock around it). It allocates in etch_policy_create only.
 */
#ifndef ETCH_POLICY_H
#define ETCH_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ETCH_POLICY_MAX_VARIANTS 64
#define ETCH_POLICY_MAX_NAME 63 /* bytes of a variant's name */

/* Thermal levels: a plain number in [0, 4], fractions allowed. The integer points follow the
 * platforms' own scales: 0 nominal, 1 light / fair, 2 moderate, 3 severe / serious (the
 * system throttles), 4 critical. Suggested mapping: Android PowerManager THERMAL_STATUS_*
 * (0..6) as min(status, 4); iOS ProcessInfo.ThermalState nominal/fair/serious/critical as
 * 0/1/3/4. A continuous sensor can be scaled onto [0, 4]. */
#define ETCH_POLICY_THERMAL_MAX 4.0

/* One variant. The name is copied at creation. */
typedef struct etch_policy_variant {
    const char *name;           /* non-empty, at most ETCH_POLICY_MAX_NAME bytes */
    double cost_ms_per_token;   /* prior per-token latency, finite, >= 0 (0: unknown) */
    double cost_ms_per_request; /* fixed part of a request's latency, finite, >= 0 */
    uint64_t memory_bytes;      /* footprint when loaded, > 0 */
    int quality;                /* rank: higher is better; distinct across the variants */
} etch_policy_variant;

typedef struct etch_policy_config {
    int64_t cooldown_ms;        /* >= 0; default 30000 */
    double latency_margin;      /* in [0, 1); default 0.2 */
    double memory_margin;       /* in [0, 1); default 0.1 */
    double thermal_down;        /* step down at thermal >= this; > thermal_up (a value above
                                   4 turns the rule off); default 3 */
    double thermal_up;          /* step up only at thermal <= this, in [0, 4]; default 1 */
    double battery_down;        /* step down at battery < this, in [0, 1] (0: rule off);
                                   default 0.15 */
    double battery_up;          /* step up only at battery >= this, in [battery_down, 1],
                                   > battery_down unless both are 0; default 0.30 */
    double ewma_alpha;          /* weight of the newest measurement, in (0, 1]; default 0.3 */
    int64_t stale_half_life_ms; /* >= 0 (0: estimates never relax); default 60000 */
} etch_policy_config;

etch_policy_config etch_policy_default_config(void);

/* What the app knows about this request and the device. */
typedef struct etch_policy_signals {
    int64_t now_ms;                /* monotonic ms, >= 0, never less than an earlier call's */
    double latency_budget_ms;      /* the request's latency target, finite, >= 0 (0: none) */
    uint32_t tokens;               /* tokens the request is expected to generate (1 with a
                                      per-token budget) */
    uint64_t memory_ceiling_bytes; /* memory the variant may use (0: no ceiling) */
    double thermal;                /* [0, 4], see ETCH_POLICY_THERMAL_MAX */
    double battery;                /* charge in [0, 1]; pass 1 while charging or without a
                                      battery */
} etch_policy_signals;

/* now 0, no budget, 1 token, no ceiling, thermal 0, battery 1. */
etch_policy_signals etch_policy_default_signals(void);

typedef enum etch_policy_reason {
    ETCH_POLICY_REASON_START = 0,   /* first request: the best variant within budget */
    ETCH_POLICY_REASON_STEADY,      /* nothing to change (at the top, or not comfortable
                                       enough to step up: the text says why) */
    ETCH_POLICY_REASON_COOLDOWN,    /* comfortable, waiting out the cool-down to step up */
    ETCH_POLICY_REASON_STEP_UP,     /* stepped up one level after the cool-down */
    ETCH_POLICY_REASON_MEMORY,      /* the current variant does not fit the ceiling */
    ETCH_POLICY_REASON_THERMAL,     /* thermal >= thermal_down */
    ETCH_POLICY_REASON_BATTERY,     /* battery < battery_down */
    ETCH_POLICY_REASON_LATENCY,     /* predicted latency over the budget */
    ETCH_POLICY_REASON_NOTHING_FITS /* no variant fits the ceiling: the smallest one */
} etch_policy_reason;

/* "start", "steady", "cooldown", "step_up", "memory", "thermal", "battery", "latency",
 * "nothing_fits"; "unknown" for other values. */
const char *etch_policy_reason_str(etch_policy_reason reason);

typedef struct etch_policy_decision {
    size_t index;              /* the chosen variant, in the caller's order */
    size_t previous;           /* the previous decision's (== index on the first) */
    bool switched;             /* index != previous */
    bool fits;                 /* false only with ETCH_POLICY_REASON_NOTHING_FITS */
    etch_policy_reason reason; /* a down reason with switched false: already at the bottom
                                  (or nothing predicted faster) */
    double predicted_ms;       /* the chosen variant's predicted latency for this request */
    char text[192];            /* one line, e.g. "thermal 3 >= 3: stepped down to 'small'" */
} etch_policy_decision;

typedef struct etch_policy etch_policy;

/* Copy the variants (and the config; NULL: the defaults). ETCH_ERR_INVALID_ARGUMENT, with a
 * message naming the variant and field, for no variants (or more than
 * ETCH_POLICY_MAX_VARIANTS), a missing/empty/long name, a negative, NaN or infinite cost, a
 * zero footprint, two variants of the same quality, or a config outside the ranges above;
 * ETCH_ERR_MEMORY_ALLOCATION_FAILED. */
etch_status etch_policy_create(const etch_policy_variant *variants, size_t n,
                               const etch_policy_config *config, etch_policy **out);
void etch_policy_destroy(etch_policy *p); /* NULL is fine */

/* Choose the variant for the next request. ETCH_ERR_INVALID_ARGUMENT (the message says which
 * signal and why; the policy's state does not change) for a NaN, infinite or out-of-range
 * signal, or a time before an earlier call's. A memory ceiling below every footprint is not
 * an error: see rule 1. */
etch_status etch_policy_choose(etch_policy *p, const etch_policy_signals *signals,
                               etch_policy_decision *out);

/* Report a request's measured latency per generated token (ms, finite, >= 0) for the variant
 * that served it, at now_ms (same clock as the signals, not earlier than an earlier call's).
 * ETCH_ERR_INVALID_ARGUMENT for a bad index, value or time. */
etch_status etch_policy_observe(etch_policy *p, size_t variant, int64_t now_ms,
                                double ms_per_token);

/* The per-token latency estimate the policy would use for `variant` at now_ms (the prior, or
 * the relaxed moving average); NaN for a bad index. */
double etch_policy_estimate(const etch_policy *p, size_t variant, int64_t now_ms);
/* Measurements reported for `variant` (0 for a bad index). */
uint64_t etch_policy_samples(const etch_policy *p, size_t variant);

size_t etch_policy_count(const etch_policy *p);
const etch_policy_variant *etch_policy_variant_at(const etch_policy *p, size_t index);

#ifdef __cplusplus
}
#endif
#endif
