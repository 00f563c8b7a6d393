/* Adaptive model choice under a budget: see include/etch/policy.h for the rules. */
#include "etch/policy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

struct etch_policy {
    size_t n;
    etch_policy_config cfg;
    etch_policy_variant v[ETCH_POLICY_MAX_VARIANTS];
    char names[ETCH_POLICY_MAX_VARIANTS][ETCH_POLICY_MAX_NAME + 1];
    size_t order[ETCH_POLICY_MAX_VARIANTS]; /* the ladder: order[0] is the best */
    size_t level[ETCH_POLICY_MAX_VARIANTS]; /* level[i]: variant i's place in the ladder */
    double ewma[ETCH_POLICY_MAX_VARIANTS];
    int64_t obs_ms[ETCH_POLICY_MAX_VARIANTS]; /* time of the last measurement */
    uint64_t samples[ETCH_POLICY_MAX_VARIANTS];
    bool started;
    size_t current;
    int64_t last_ms;      /* the latest time a call gave */
    int64_t moved_ms;     /* time of the last move (the first decision counts) */
    int64_t comfy_since;  /* first request of the current comfortable streak; -1: none */
};

etch_policy_config etch_policy_default_config(void) {
    etch_policy_config c;
    c.cooldown_ms = 30000;
    c.latency_margin = 0.2;
    c.memory_margin = 0.1;
    c.thermal_down = 3.0;
    c.thermal_up = 1.0;
    c.battery_down = 0.15;
    c.battery_up = 0.30;
    c.ewma_alpha = 0.3;
    c.stale_half_life_ms = 60000;
    return c;
}

etch_policy_signals etch_policy_default_signals(void) {
    etch_policy_signals s;
    memset(&s, 0, sizeof s);
    s.tokens = 1;
    s.battery = 1.0;
    return s;
}

const char *etch_policy_reason_str(etch_policy_reason r) {
    switch (r) {
    case ETCH_POLICY_REASON_START: return "start";
    case ETCH_POLICY_REASON_STEADY: return "steady";
    case ETCH_POLICY_REASON_COOLDOWN: return "cooldown";
    case ETCH_POLICY_REASON_STEP_UP: return "step_up";
    case ETCH_POLICY_REASON_MEMORY: return "memory";
    case ETCH_POLICY_REASON_THERMAL: return "thermal";
    case ETCH_POLICY_REASON_BATTERY: return "battery";
    case ETCH_POLICY_REASON_LATENCY: return "latency";
    case ETCH_POLICY_REASON_NOTHING_FITS: return "nothing_fits";
    }
    return "unknown";
}

static bool in_range(double x, double lo, double hi) { return x >= lo && x <= hi; } /* NaN: no */

static etch_status check_config(const etch_policy_config *c) {
    if (c->cooldown_ms < 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "policy config: cooldown_ms %lld < 0",
                        (long long)c->cooldown_ms);
    if (c->stale_half_life_ms < 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "policy config: stale_half_life_ms %lld < 0",
                        (long long)c->stale_half_life_ms);
    if (!(c->latency_margin >= 0.0 && c->latency_margin < 1.0))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy config: latency_margin %g is not in [0, 1)", c->latency_margin);
    if (!(c->memory_margin >= 0.0 && c->memory_margin < 1.0))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy config: memory_margin %g is not in [0, 1)", c->memory_margin);
    if (!in_range(c->thermal_up, 0.0, ETCH_POLICY_THERMAL_MAX))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy config: thermal_up %g is not in [0, 4]", c->thermal_up);
    if (!(isfinite(c->thermal_down) && c->thermal_down > c->thermal_up))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy config: thermal_down %g must be finite and above thermal_up %g",
                        c->thermal_down, c->thermal_up);
    if (!in_range(c->battery_down, 0.0, 1.0) || !in_range(c->battery_up, 0.0, 1.0))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy config: battery_down %g and battery_up %g must be in [0, 1]",
                        c->battery_down, c->battery_up);
    if (!(c->battery_up > c->battery_down || (c->battery_up == 0.0 && c->battery_down == 0.0)))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy config: battery_up %g must be above battery_down %g",
                        c->battery_up, c->battery_down);
    if (!(c->ewma_alpha > 0.0 && c->ewma_alpha <= 1.0))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy config: ewma_alpha %g is not in (0, 1]", c->ewma_alpha);
    return ETCH_OK;
}

static bool finite_nonneg(double x) { return isfinite(x) && x >= 0.0; }

static etch_status check_variant(const etch_policy_variant *v, size_t i) {
    if (!v->name || !v->name[0])
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "policy variant %zu: no name", i);
    if (strlen(v->name) > ETCH_POLICY_MAX_NAME)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy variant %zu: the name is %zu bytes (at most %d)", i,
                        strlen(v->name), ETCH_POLICY_MAX_NAME);
    if (!finite_nonneg(v->cost_ms_per_token))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy variant %zu ('%s'): cost_ms_per_token %g is not a finite "
                        "number >= 0",
                        i, v->name, v->cost_ms_per_token);
    if (!finite_nonneg(v->cost_ms_per_request))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy variant %zu ('%s'): cost_ms_per_request %g is not a finite "
                        "number >= 0",
                        i, v->name, v->cost_ms_per_request);
    if (v->memory_bytes == 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy variant %zu ('%s'): memory_bytes is 0", i, v->name);
    return ETCH_OK;
}

etch_status etch_policy_create(const etch_policy_variant *variants, size_t n,
                               const etch_policy_config *config, etch_policy **out) {
    if (!out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "etch_policy_create: out is NULL");
    if (n == 0 || !variants)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "policy: no variants");
    if (n > ETCH_POLICY_MAX_VARIANTS)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "policy: %zu variants (at most %d)", n,
                        ETCH_POLICY_MAX_VARIANTS);
    etch_policy_config cfg = config ? *config : etch_policy_default_config();
    etch_status st = check_config(&cfg);
    if (st != ETCH_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        if ((st = check_variant(&variants[i], i)) != ETCH_OK)
            return st;
        for (size_t j = 0; j < i; j++)
            if (variants[j].quality == variants[i].quality)
                return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                                "policy variants %zu ('%s') and %zu ('%s') have the same "
                                "quality %d: the ranks must differ",
                                j, variants[j].name, i, variants[i].name, variants[i].quality);
    }
    etch_policy *p = calloc(1, sizeof *p);
    if (!p)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "policy: out of memory");
    p->n = n;
    p->cfg = cfg;
    for (size_t i = 0; i < n; i++) {
        p->v[i] = variants[i];
        memcpy(p->names[i], variants[i].name, strlen(variants[i].name) + 1);
        p->v[i].name = p->names[i];
        p->order[i] = i;
    }
    /* the ladder: quality descending (insertion sort; n is small) */
    for (size_t i = 1; i < n; i++) {
        size_t x = p->order[i], j = i;
        while (j > 0 && p->v[p->order[j - 1]].quality < p->v[x].quality) {
            p->order[j] = p->order[j - 1];
            j--;
        }
        p->order[j] = x;
    }
    for (size_t k = 0; k < n; k++)
        p->level[p->order[k]] = k;
    p->comfy_since = -1;
    *out = p;
    return ETCH_OK;
}

void etch_policy_destroy(etch_policy *p) { free(p); }

size_t etch_policy_count(const etch_policy *p) { return p ? p->n : 0; }

const etch_policy_variant *etch_policy_variant_at(const etch_policy *p, size_t i) {
    return p && i < p->n ? &p->v[i] : NULL;
}

uint64_t etch_policy_samples(const etch_policy *p, size_t i) {
    return p && i < p->n ? p->samples[i] : 0;
}

static double estimate(const etch_policy *p, size_t i, int64_t now) {
    double prior = p->v[i].cost_ms_per_token;
    if (p->samples[i] == 0)
        return prior;
    double e = p->ewma[i];
    if (p->cfg.stale_half_life_ms > 0 && now > p->obs_ms[i])
        e = prior + (e - prior) * exp2(-(double)(now - p->obs_ms[i]) /
                                       (double)p->cfg.stale_half_life_ms);
    return e;
}

double etch_policy_estimate(const etch_policy *p, size_t i, int64_t now_ms) {
    return p && i < p->n ? estimate(p, i, now_ms) : NAN;
}

etch_status etch_policy_observe(etch_policy *p, size_t i, int64_t now_ms, double ms_per_token) {
    if (!p)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "etch_policy_observe: no policy");
    if (i >= p->n)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy observe: variant %zu out of range (%zu variants)", i, p->n);
    if (!finite_nonneg(ms_per_token))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy observe: latency %g ms per token is not a finite number >= 0",
                        ms_per_token);
    if (now_ms < 0 || now_ms < p->last_ms)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy observe: now_ms %lld is before an earlier call's %lld",
                        (long long)now_ms, (long long)p->last_ms);
    if (p->samples[i] == 0) {
        p->ewma[i] = ms_per_token;
    } else {
        double base = estimate(p, i, now_ms);
        p->ewma[i] = base + p->cfg.ewma_alpha * (ms_per_token - base);
    }
    p->samples[i]++;
    p->obs_ms[i] = now_ms;
    p->last_ms = now_ms;
    return ETCH_OK;
}

/* ---- deciding ----------------------------------------------------------------------------- */

static double predicted(const etch_policy *p, size_t i, const etch_policy_signals *s) {
    return p->v[i].cost_ms_per_request + estimate(p, i, s->now_ms) * (double)s->tokens;
}

static bool within_budget(const etch_policy *p, size_t i, const etch_policy_signals *s,
                          double margin) {
    return s->latency_budget_ms == 0.0 ||
           predicted(p, i, s) <= (1.0 - margin) * s->latency_budget_ms;
}

static bool fits(const etch_policy *p, size_t i, const etch_policy_signals *s, double margin) {
    if (s->memory_ceiling_bytes == 0)
        return true;
    if (margin == 0.0)
        return p->v[i].memory_bytes <= s->memory_ceiling_bytes;
    return (double)p->v[i].memory_bytes <= (1.0 - margin) * (double)s->memory_ceiling_bytes;
}

/* The nearest fitting variant below `cur` in the ladder, or n. */
static size_t next_lower(const etch_policy *p, size_t cur, const etch_policy_signals *s) {
    for (size_t k = p->level[cur] + 1; k < p->n; k++)
        if (fits(p, p->order[k], s, 0.0))
            return p->order[k];
    return p->n;
}

static void say(etch_policy_decision *d, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say(etch_policy_decision *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->text, sizeof d->text, fmt, ap);
    va_end(ap);
}

static etch_status check_signals(const etch_policy *p, const etch_policy_signals *s) {
    if (s->now_ms < 0 || s->now_ms < p->last_ms)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy signals: now_ms %lld is before an earlier call's %lld (the "
                        "clock must be monotonic)",
                        (long long)s->now_ms, (long long)p->last_ms);
    if (!finite_nonneg(s->latency_budget_ms))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy signals: latency_budget_ms %g is not a finite number >= 0 "
                        "(0: no budget)",
                        s->latency_budget_ms);
    if (!in_range(s->thermal, 0.0, ETCH_POLICY_THERMAL_MAX))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy signals: thermal %g is not in [0, 4]", s->thermal);
    if (!in_range(s->battery, 0.0, 1.0))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "policy signals: battery %g is not in [0, 1]", s->battery);
    return ETCH_OK;
}

static void move_to(etch_policy *p, size_t to, int64_t now) {
    if (to != p->current) {
        p->current = to;
        p->moved_ms = now;
    }
    p->comfy_since = -1;
}

/* Rules 2 and 3 (one level down). True when one applied. */
static bool thermal_battery(etch_policy *p, const etch_policy_signals *s,
                            etch_policy_decision *d, const char *prefix) {
    const etch_policy_config *c = &p->cfg;
    bool hot = s->thermal >= c->thermal_down;
    bool low = !hot && s->battery < c->battery_down;
    if (!hot && !low)
        return false;
    size_t cur = p->current, to = next_lower(p, cur, s);
    char what[64];
    if (hot)
        snprintf(what, sizeof what, "thermal %g >= %g", s->thermal, c->thermal_down);
    else
        snprintf(what, sizeof what, "battery %g < %g", s->battery, c->battery_down);
    d->reason = hot ? ETCH_POLICY_REASON_THERMAL : ETCH_POLICY_REASON_BATTERY;
    if (to < p->n) {
        say(d, "%s%s: stepped down to '%s'", prefix, what, p->v[to].name);
        move_to(p, to, s->now_ms);
    } else {
        say(d, "%s%s: '%s' is already the lowest", prefix, what, p->v[cur].name);
        p->comfy_since = -1;
    }
    return true;
}

static void choose_start(etch_policy *p, const etch_policy_signals *s,
                         etch_policy_decision *d) {
    size_t best = p->n, fastest = p->n;
    for (size_t k = 0; k < p->n; k++) {
        size_t i = p->order[k];
        if (!fits(p, i, s, 0.0))
            continue;
        if (fastest == p->n || predicted(p, i, s) < predicted(p, fastest, s))
            fastest = i;
        if (best == p->n && within_budget(p, i, s, 0.0))
            best = i;
    }
    p->started = true;
    p->moved_ms = s->now_ms;
    p->comfy_since = -1;
    d->reason = ETCH_POLICY_REASON_START;
    if (best < p->n) {
        p->current = best;
        say(d, "start: '%s' is the best variant that fits", p->v[best].name);
    } else {
        p->current = fastest;
        d->reason = ETCH_POLICY_REASON_LATENCY;
        say(d, "start: no variant is predicted within %g ms: '%s' is the fastest (%g ms)",
            s->latency_budget_ms, p->v[fastest].name, predicted(p, fastest, s));
    }
    thermal_battery(p, s, d, "start: ");
}

etch_status etch_policy_choose(etch_policy *p, const etch_policy_signals *s,
                               etch_policy_decision *out) {
    if (!p || !s || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "etch_policy_choose: NULL argument");
    etch_status st = check_signals(p, s);
    if (st != ETCH_OK)
        return st;
    const etch_policy_config *c = &p->cfg;
    etch_policy_decision d;
    memset(&d, 0, sizeof d);
    d.fits = true;
    bool was_started = p->started;
    size_t prev = p->current;
    int64_t now = s->now_ms;

    size_t smallest = p->n, any_fit = p->n;
    for (size_t k = 0; k < p->n; k++) {
        size_t i = p->order[k];
        if (smallest == p->n || p->v[i].memory_bytes < p->v[smallest].memory_bytes)
            smallest = i;
        if (any_fit == p->n && fits(p, i, s, 0.0))
            any_fit = i;
    }
    if (any_fit == p->n) {
        /* rule 1, nothing fits: the smallest footprint, and say so */
        if (!was_started) {
            p->started = true;
            p->moved_ms = now;
            p->current = smallest;
        }
        move_to(p, smallest, now);
        d.fits = false;
        d.reason = ETCH_POLICY_REASON_NOTHING_FITS;
        say(&d, "no variant fits the memory ceiling of %llu bytes: '%s' is the smallest "
                "(%llu bytes)",
            (unsigned long long)s->memory_ceiling_bytes, p->v[smallest].name,
            (unsigned long long)p->v[smallest].memory_bytes);
    } else if (!was_started) {
        choose_start(p, s, &d);
    } else if (!fits(p, p->current, s, 0.0)) {
        /* rule 1: the best fitting variant below, else the best fitting one */
        size_t cur = p->current, to = p->n;
        for (size_t k = p->level[cur] + 1; k < p->n && to == p->n; k++)
            if (fits(p, p->order[k], s, 0.0))
                to = p->order[k];
        if (to == p->n)
            to = any_fit;
        d.reason = ETCH_POLICY_REASON_MEMORY;
        say(&d, "'%s' needs %llu bytes > ceiling %llu: moved to '%s'", p->v[cur].name,
            (unsigned long long)p->v[cur].memory_bytes,
            (unsigned long long)s->memory_ceiling_bytes, p->v[to].name);
        move_to(p, to, now);
    } else if (thermal_battery(p, s, &d, "")) {
        /* rules 2, 3 */
    } else if (!within_budget(p, p->current, s, 0.0)) {
        /* rule 4: the best variant below within budget, else the fastest below if faster */
        size_t cur = p->current, to = p->n, fastest = cur;
        for (size_t k = p->level[cur] + 1; k < p->n; k++) {
            size_t i = p->order[k];
            if (!fits(p, i, s, 0.0))
                continue;
            if (to == p->n && within_budget(p, i, s, 0.0))
                to = i;
            if (predicted(p, i, s) < predicted(p, fastest, s))
                fastest = i;
        }
        if (to == p->n)
            to = fastest;
        d.reason = ETCH_POLICY_REASON_LATENCY;
        if (to != cur)
            say(&d, "'%s' predicted %.3g ms > budget %g ms: moved to '%s' (%.3g ms)",
                p->v[cur].name, predicted(p, cur, s), s->latency_budget_ms, p->v[to].name,
                predicted(p, to, s));
        else
            say(&d, "'%s' predicted %.3g ms > budget %g ms: nothing below is faster",
                p->v[cur].name, predicted(p, cur, s), s->latency_budget_ms);
        move_to(p, to, now);
    } else {
        /* rule 5 */
        size_t cur = p->current, up = p->n;
        for (size_t k = p->level[cur]; k-- > 0 && up == p->n;)
            if (fits(p, p->order[k], s, c->memory_margin))
                up = p->order[k];
        d.reason = ETCH_POLICY_REASON_STEADY;
        if (p->level[cur] == 0) {
            say(&d, "'%s' is the best variant and within budget", p->v[cur].name);
            p->comfy_since = -1;
        } else if (up == p->n) {
            say(&d, "holding '%s': nothing better fits %g%% of the memory ceiling",
                p->v[cur].name, 100.0 * (1.0 - c->memory_margin));
            p->comfy_since = -1;
        } else if (s->thermal > c->thermal_up) {
            say(&d, "holding '%s': thermal %g > %g", p->v[cur].name, s->thermal, c->thermal_up);
            p->comfy_since = -1;
        } else if (s->battery < c->battery_up) {
            say(&d, "holding '%s': battery %g < %g", p->v[cur].name, s->battery, c->battery_up);
            p->comfy_since = -1;
        } else if (!within_budget(p, up, s, c->latency_margin)) {
            say(&d, "holding '%s': '%s' predicted %.3g ms > %g%% of budget %g ms",
                p->v[cur].name, p->v[up].name, predicted(p, up, s),
                100.0 * (1.0 - c->latency_margin), s->latency_budget_ms);
            p->comfy_since = -1;
        } else {
            if (p->comfy_since < 0)
                p->comfy_since = now;
            int64_t comfy = now - p->comfy_since, since_move = now - p->moved_ms;
            if (comfy >= c->cooldown_ms && since_move >= c->cooldown_ms) {
                d.reason = ETCH_POLICY_REASON_STEP_UP;
                say(&d, "within budget for %lld ms >= cool-down %lld ms: stepped up to '%s'",
                    (long long)comfy, (long long)c->cooldown_ms, p->v[up].name);
                move_to(p, up, now);
            } else {
                d.reason = ETCH_POLICY_REASON_COOLDOWN;
                say(&d, "holding '%s': within budget for %lld of %lld ms (cool-down)",
                    p->v[cur].name, (long long)(comfy < since_move ? comfy : since_move),
                    (long long)c->cooldown_ms);
            }
        }
    }
    p->last_ms = now;
    d.index = p->current;
    d.previous = was_started ? prev : p->current;
    d.switched = d.index != d.previous;
    d.predicted_ms = predicted(p, d.index, s);
    *out = d;
    return ETCH_OK;
}
