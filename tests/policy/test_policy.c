/* etch/policy.h: every rule on its own, bad input, and a simulated thermal trace (a phone
 * heating up during a chat, then cooling). Latencies are numbers fed in, never timings.
 * POLICY_TRACE=1 prints the trace's decisions. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/policy.h"
#include "etch_test.h"

#define MB (1024ull * 1024ull)

enum { LARGE = 0, SMALL = 1 };

static etch_policy_variant two[2] = {
    {.name = "large", .cost_ms_per_token = 40, .memory_bytes = 900 * MB, .quality = 2},
    {.name = "small", .cost_ms_per_token = 15, .memory_bytes = 300 * MB, .quality = 1},
};

static etch_policy *make(const etch_policy_variant *v, size_t n, const etch_policy_config *c) {
    etch_policy *p = NULL;
    CHECK_OK(etch_policy_create(v, n, c, &p));
    return p;
}

static etch_policy_signals sig(int64_t now, double thermal, double battery) {
    etch_policy_signals s = etch_policy_default_signals();
    s.now_ms = now;
    s.thermal = thermal;
    s.battery = battery;
    s.latency_budget_ms = 60;
    s.memory_ceiling_bytes = 2048 * MB;
    return s;
}

static etch_policy_decision pick(etch_policy *p, etch_policy_signals s) {
    etch_policy_decision d;
    memset(&d, 0xab, sizeof d);
    etch_status st = etch_policy_choose(p, &s, &d);
    CHECK_MSG(st == ETCH_OK, "%s", etch_last_error());
    return d;
}

static void expect_error(etch_status st, const char *needle) {
    CHECK_MSG(st == ETCH_ERR_INVALID_ARGUMENT, "got %s", etch_status_str(st));
    CHECK_MSG(strstr(etch_last_error(), needle) != NULL, "message '%s' lacks '%s'",
              etch_last_error(), needle);
}

static void test_create_errors(void) {
    etch_policy *p = (etch_policy *)&p; /* untouched on failure */
    etch_policy *keep = p;
    expect_error(etch_policy_create(two, 0, NULL, &p), "no variants");
    expect_error(etch_policy_create(NULL, 2, NULL, &p), "no variants");
    expect_error(etch_policy_create(two, ETCH_POLICY_MAX_VARIANTS + 1, NULL, &p), "at most");
    CHECK(p == keep);

    etch_policy_variant v[2];
    memcpy(v, two, sizeof v);
    v[1].name = "";
    expect_error(etch_policy_create(v, 2, NULL, &p), "variant 1: no name");
    v[1].name = NULL;
    expect_error(etch_policy_create(v, 2, NULL, &p), "variant 1: no name");
    char longname[ETCH_POLICY_MAX_NAME + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    v[1].name = longname;
    expect_error(etch_policy_create(v, 2, NULL, &p), "bytes (at most 63)");
    memcpy(v, two, sizeof v);
    v[0].cost_ms_per_token = NAN;
    expect_error(etch_policy_create(v, 2, NULL, &p), "'large'): cost_ms_per_token nan");
    v[0].cost_ms_per_token = -1;
    expect_error(etch_policy_create(v, 2, NULL, &p), "cost_ms_per_token -1");
    v[0].cost_ms_per_token = 40;
    v[0].cost_ms_per_request = INFINITY;
    expect_error(etch_policy_create(v, 2, NULL, &p), "cost_ms_per_request inf");
    v[0].cost_ms_per_request = 0;
    v[1].memory_bytes = 0;
    expect_error(etch_policy_create(v, 2, NULL, &p), "'small'): memory_bytes is 0");
    v[1].memory_bytes = 1;
    v[1].quality = 2;
    expect_error(etch_policy_create(v, 2, NULL, &p), "same quality 2");
    CHECK(p == keep);
    expect_error(etch_policy_create(two, 2, NULL, NULL), "out is NULL");

    etch_policy_config c = etch_policy_default_config();
    c.thermal_down = 1;
    expect_error(etch_policy_create(two, 2, &c, &p), "above thermal_up");
    c = etch_policy_default_config();
    c.thermal_up = NAN;
    expect_error(etch_policy_create(two, 2, &c, &p), "thermal_up nan");
    c = etch_policy_default_config();
    c.battery_up = 0.1;
    expect_error(etch_policy_create(two, 2, &c, &p), "battery_up 0.1 must be above");
    c = etch_policy_default_config();
    c.battery_down = -0.5;
    expect_error(etch_policy_create(two, 2, &c, &p), "must be in [0, 1]");
    c = etch_policy_default_config();
    c.latency_margin = 1;
    expect_error(etch_policy_create(two, 2, &c, &p), "latency_margin 1");
    c = etch_policy_default_config();
    c.memory_margin = -0.1;
    expect_error(etch_policy_create(two, 2, &c, &p), "memory_margin -0.1");
    c = etch_policy_default_config();
    c.ewma_alpha = 0;
    expect_error(etch_policy_create(two, 2, &c, &p), "ewma_alpha 0");
    c = etch_policy_default_config();
    c.cooldown_ms = -1;
    expect_error(etch_policy_create(two, 2, &c, &p), "cooldown_ms -1");
    c = etch_policy_default_config();
    c.stale_half_life_ms = -1;
    expect_error(etch_policy_create(two, 2, &c, &p), "stale_half_life_ms");
    CHECK(p == keep);
    /* both battery levels 0: the battery rule is off, which is allowed */
    c = etch_policy_default_config();
    c.battery_down = c.battery_up = 0;
    p = make(two, 2, &c);
    etch_policy_destroy(p);
    etch_policy_destroy(NULL);
}

static void test_signal_errors(void) {
    etch_policy *p = make(two, 2, NULL);
    etch_policy_decision d, before;
    memset(&d, 0x5a, sizeof d);
    before = d;
    etch_policy_signals s = sig(1000, NAN, 1);
    expect_error(etch_policy_choose(p, &s, &d), "thermal nan is not in [0, 4]");
    s = sig(1000, 4.5, 1);
    expect_error(etch_policy_choose(p, &s, &d), "thermal 4.5");
    s = sig(1000, -1, 1);
    expect_error(etch_policy_choose(p, &s, &d), "thermal -1");
    s = sig(1000, 0, -0.1);
    expect_error(etch_policy_choose(p, &s, &d), "battery -0.1 is not in [0, 1]");
    s = sig(1000, 0, NAN);
    expect_error(etch_policy_choose(p, &s, &d), "battery nan");
    s = sig(1000, 0, 1.5);
    expect_error(etch_policy_choose(p, &s, &d), "battery 1.5");
    s = sig(1000, 0, 1);
    s.latency_budget_ms = -5;
    expect_error(etch_policy_choose(p, &s, &d), "latency_budget_ms -5");
    s.latency_budget_ms = NAN;
    expect_error(etch_policy_choose(p, &s, &d), "latency_budget_ms nan");
    s.latency_budget_ms = INFINITY;
    expect_error(etch_policy_choose(p, &s, &d), "latency_budget_ms inf");
    s = sig(-1, 0, 1);
    expect_error(etch_policy_choose(p, &s, &d), "now_ms -1");
    expect_error(etch_policy_choose(p, NULL, &d), "NULL");
    CHECK(memcmp(&d, &before, sizeof d) == 0); /* untouched */
    /* none of that changed the state: the first valid call is still the start */
    d = pick(p, sig(1000, 0, 1));
    CHECK(d.reason == ETCH_POLICY_REASON_START && d.index == LARGE);
    s = sig(999, 0, 1);
    expect_error(etch_policy_choose(p, &s, &d), "before an earlier call's 1000");
    /* observe */
    expect_error(etch_policy_observe(p, 2, 1000, 10), "variant 2 out of range");
    expect_error(etch_policy_observe(p, 0, 1000, NAN), "latency nan");
    expect_error(etch_policy_observe(p, 0, 1000, -3), "latency -3");
    expect_error(etch_policy_observe(p, 0, 10, 5), "now_ms 10 is before");
    CHECK(etch_policy_samples(p, 0) == 0);
    CHECK(isnan(etch_policy_estimate(p, 7, 0)));
    CHECK(etch_policy_variant_at(p, 2) == NULL);
    CHECK(strcmp(etch_policy_variant_at(p, 1)->name, "small") == 0);
    CHECK(etch_policy_count(p) == 2);
    etch_policy_destroy(p);
}

static void test_start(void) {
    /* the ladder follows quality, not the caller's order */
    etch_policy_variant rev[2] = {two[1], two[0]};
    etch_policy *p = make(rev, 2, NULL);
    etch_policy_decision d = pick(p, sig(0, 0, 1));
    CHECK(d.index == 1 && d.reason == ETCH_POLICY_REASON_START && !d.switched && d.fits);
    CHECK_MSG(strcmp(d.text, "start: 'large' is the best variant that fits") == 0, "%s", d.text);
    CHECK_NEAR(d.predicted_ms, 40, 1e-9);
    etch_policy_destroy(p);

    /* budget too tight for large: start on small */
    p = make(two, 2, NULL);
    etch_policy_signals s = sig(0, 0, 1);
    s.latency_budget_ms = 30;
    d = pick(p, s);
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_START);
    etch_policy_destroy(p);

    /* nothing within budget: the fastest, and said so */
    p = make(two, 2, NULL);
    s.latency_budget_ms = 10;
    d = pick(p, s);
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_LATENCY);
    CHECK_MSG(strstr(d.text, "no variant is predicted within 10 ms: 'small'") != NULL, "%s",
              d.text);
    etch_policy_destroy(p);

    /* memory excludes large at the start */
    p = make(two, 2, NULL);
    s = sig(0, 0, 1);
    s.memory_ceiling_bytes = 500 * MB;
    d = pick(p, s);
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_START);
    etch_policy_destroy(p);

    /* hot at the start: one step below the best */
    p = make(two, 2, NULL);
    d = pick(p, sig(0, 3, 1));
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_THERMAL && !d.switched);
    CHECK_MSG(strcmp(d.text, "start: thermal 3 >= 3: stepped down to 'small'") == 0, "%s",
              d.text);
    etch_policy_destroy(p);

    /* no budget, no ceiling: the best */
    p = make(two, 2, NULL);
    d = pick(p, etch_policy_default_signals());
    CHECK(d.index == LARGE);
    etch_policy_destroy(p);
}

static void test_memory(void) {
    etch_policy *p = make(two, 2, NULL);
    CHECK(pick(p, sig(0, 0, 1)).index == LARGE);
    etch_policy_signals s = sig(100, 0, 1);
    s.memory_ceiling_bytes = 600 * MB;
    etch_policy_decision d = pick(p, s);
    CHECK(d.index == SMALL && d.switched && d.previous == LARGE &&
          d.reason == ETCH_POLICY_REASON_MEMORY && d.fits);
    CHECK_MSG(strstr(d.text, "'large' needs 943718400 bytes > ceiling 629145600: moved to "
                             "'small'") != NULL,
              "%s", d.text);
    /* ceiling below every footprint: the smallest, reported, not an error */
    s.now_ms = 200;
    s.memory_ceiling_bytes = 100 * MB;
    d = pick(p, s);
    CHECK(d.index == SMALL && !d.fits && d.reason == ETCH_POLICY_REASON_NOTHING_FITS);
    CHECK_MSG(strstr(d.text, "no variant fits the memory ceiling of 104857600 bytes: 'small' "
                             "is the smallest") != NULL,
              "%s", d.text);
    /* memory back, but at large's footprint plus less than the 10% margin: hold */
    s.now_ms = 100000;
    s.memory_ceiling_bytes = 950 * MB;
    d = pick(p, s);
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_STEADY);
    CHECK_MSG(strstr(d.text, "nothing better fits 90% of the memory ceiling") != NULL, "%s",
              d.text);
    s.now_ms = 200000;
    s.memory_ceiling_bytes = 2048 * MB;
    d = pick(p, s); /* comfortable from here: the cool-down starts */
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_COOLDOWN);
    s.now_ms = 230000;
    d = pick(p, s);
    CHECK(d.index == LARGE && d.reason == ETCH_POLICY_REASON_STEP_UP);
    etch_policy_destroy(p);

    /* nothing fits on the very first request */
    p = make(two, 2, NULL);
    s = sig(0, 0, 1);
    s.memory_ceiling_bytes = 1;
    d = pick(p, s);
    CHECK(d.index == SMALL && !d.fits && !d.switched);
    etch_policy_destroy(p);
}

static void test_thermal(void) {
    etch_policy *p = make(two, 2, NULL);
    CHECK(pick(p, sig(0, 0, 1)).index == LARGE);
    CHECK(pick(p, sig(1000, 2.9, 1)).index == LARGE); /* below the down level: stay */
    etch_policy_decision d = pick(p, sig(2000, 3, 1));
    CHECK(d.index == SMALL && d.switched && d.reason == ETCH_POLICY_REASON_THERMAL);
    CHECK_MSG(strcmp(d.text, "thermal 3 >= 3: stepped down to 'small'") == 0, "%s", d.text);
    d = pick(p, sig(3000, 4, 1));
    CHECK(d.index == SMALL && !d.switched && d.reason == ETCH_POLICY_REASON_THERMAL);
    CHECK_MSG(strcmp(d.text, "thermal 4 >= 3: 'small' is already the lowest") == 0, "%s",
              d.text);
    /* between the levels: hold, however long */
    d = pick(p, sig(100000, 2, 1));
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_STEADY);
    CHECK_MSG(strcmp(d.text, "holding 'small': thermal 2 > 1") == 0, "%s", d.text);
    d = pick(p, sig(200000, 1.5, 1));
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_STEADY);
    /* at the up level: cool-down from the first comfortable request */
    d = pick(p, sig(210000, 1, 1));
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_COOLDOWN);
    CHECK_MSG(strcmp(d.text, "holding 'small': within budget for 0 of 30000 ms (cool-down)") ==
                  0,
              "%s", d.text);
    d = pick(p, sig(239999, 0.5, 1));
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_COOLDOWN);
    d = pick(p, sig(240000, 0.5, 1));
    CHECK(d.index == LARGE && d.switched && d.reason == ETCH_POLICY_REASON_STEP_UP);
    CHECK_MSG(strcmp(d.text, "within budget for 30000 ms >= cool-down 30000 ms: stepped up to "
                             "'large'") == 0,
              "%s", d.text);
    d = pick(p, sig(250000, 0, 1));
    CHECK(d.index == LARGE && d.reason == ETCH_POLICY_REASON_STEADY);
    etch_policy_destroy(p);

    /* an interruption restarts the cool-down */
    p = make(two, 2, NULL);
    pick(p, sig(0, 3, 1));                                      /* small */
    CHECK(pick(p, sig(40000, 1, 1)).reason == ETCH_POLICY_REASON_COOLDOWN);
    CHECK(pick(p, sig(60000, 2, 1)).reason == ETCH_POLICY_REASON_STEADY); /* warm again */
    CHECK(pick(p, sig(70000, 1, 1)).reason == ETCH_POLICY_REASON_COOLDOWN);
    CHECK(pick(p, sig(99999, 1, 1)).index == SMALL);
    CHECK(pick(p, sig(100000, 1, 1)).index == LARGE);
    etch_policy_destroy(p);

    /* the cool-down also runs from the last move: a step down just now blocks the way up */
    etch_policy_config c = etch_policy_default_config();
    c.cooldown_ms = 0;
    p = make(two, 2, &c);
    pick(p, sig(0, 3, 1));
    d = pick(p, sig(1, 1, 1)); /* cool-down 0: straight back up */
    CHECK(d.index == LARGE && d.reason == ETCH_POLICY_REASON_STEP_UP);
    etch_policy_destroy(p);

    /* three variants: sustained heat steps down one level per request */
    etch_policy_variant three[3] = {
        {.name = "xl", .cost_ms_per_token = 45, .memory_bytes = 1500 * MB, .quality = 3},
        two[0],
        two[1],
    };
    p = make(three, 3, NULL);
    CHECK(pick(p, sig(0, 0, 1)).index == 0);
    CHECK(pick(p, sig(1000, 3.5, 1)).index == 1);
    CHECK(pick(p, sig(2000, 3.5, 1)).index == 2);
    CHECK(pick(p, sig(3000, 3.5, 1)).index == 2);
    /* and climbs one level per cool-down */
    CHECK(pick(p, sig(10000, 0, 1)).reason == ETCH_POLICY_REASON_COOLDOWN);
    CHECK(pick(p, sig(40000, 0, 1)).index == 1);
    CHECK(pick(p, sig(50000, 0, 1)).reason == ETCH_POLICY_REASON_COOLDOWN);
    CHECK(pick(p, sig(69999, 0, 1)).index == 1);
    d = pick(p, sig(80000, 0, 1));
    CHECK(d.index == 0 && d.previous == 1);
    etch_policy_destroy(p);

    /* thermal_down above 4: the rule is off */
    c = etch_policy_default_config();
    c.thermal_down = 5;
    p = make(two, 2, &c);
    pick(p, sig(0, 0, 1));
    CHECK(pick(p, sig(1, 4, 1)).index == LARGE);
    etch_policy_destroy(p);
}

static void test_battery(void) {
    etch_policy *p = make(two, 2, NULL);
    CHECK(pick(p, sig(0, 0, 0.5)).index == LARGE);
    CHECK(pick(p, sig(1000, 0, 0.15)).index == LARGE); /* not below 0.15 */
    etch_policy_decision d = pick(p, sig(2000, 0, 0.14));
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_BATTERY);
    CHECK_MSG(strcmp(d.text, "battery 0.14 < 0.15: stepped down to 'small'") == 0, "%s", d.text);
    d = pick(p, sig(100000, 0, 0.29)); /* charging, not there yet */
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_STEADY);
    CHECK_MSG(strcmp(d.text, "holding 'small': battery 0.29 < 0.3") == 0, "%s", d.text);
    CHECK(pick(p, sig(110000, 0, 0.3)).reason == ETCH_POLICY_REASON_COOLDOWN);
    CHECK(pick(p, sig(140000, 0, 0.35)).index == LARGE);
    etch_policy_destroy(p);

    /* thermal is checked first: both at once say thermal */
    p = make(two, 2, NULL);
    pick(p, sig(0, 0, 1));
    CHECK(pick(p, sig(1, 3, 0.05)).reason == ETCH_POLICY_REASON_THERMAL);
    etch_policy_destroy(p);
}

static void test_latency_and_ewma(void) {
    etch_policy_config c = etch_policy_default_config();
    c.stale_half_life_ms = 0; /* exact moving averages */
    etch_policy *p = make(two, 2, &c);
    CHECK_NEAR(etch_policy_estimate(p, LARGE, 0), 40, 1e-12); /* the prior */
    CHECK(pick(p, sig(0, 0, 1)).index == LARGE);
    CHECK_OK(etch_policy_observe(p, LARGE, 10, 50)); /* the first sample replaces the prior */
    CHECK_NEAR(etch_policy_estimate(p, LARGE, 10), 50, 1e-12);
    CHECK_OK(etch_policy_observe(p, LARGE, 20, 60)); /* 50 + 0.3 * 10 */
    CHECK_NEAR(etch_policy_estimate(p, LARGE, 20), 53, 1e-12);
    CHECK(etch_policy_samples(p, LARGE) == 2);
    etch_policy_decision d = pick(p, sig(30, 0, 1));
    CHECK(d.index == LARGE && d.reason == ETCH_POLICY_REASON_STEADY);
    CHECK_NEAR(d.predicted_ms, 53, 1e-12);
    /* one slow request: the next one steps down */
    CHECK_OK(etch_policy_observe(p, LARGE, 40, 83)); /* 53 + 0.3 * 30 = 62 > 60 */
    d = pick(p, sig(50, 0, 1));
    CHECK(d.index == SMALL && d.switched && d.reason == ETCH_POLICY_REASON_LATENCY);
    CHECK_MSG(strcmp(d.text, "'large' predicted 62 ms > budget 60 ms: moved to 'small' (15 ms)") ==
                  0,
              "%s", d.text);
    /* without relaxing, large stays predicted at 62: over 80% of the budget, no way up */
    d = pick(p, sig(1000000, 0, 1));
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_STEADY);
    CHECK_MSG(strcmp(d.text, "holding 'small': 'large' predicted 62 ms > 80% of budget 60 ms") ==
                  0,
              "%s", d.text);
    /* a looser budget: 62 <= 0.8 * 80 */
    etch_policy_signals s = sig(1000001, 0, 1);
    s.latency_budget_ms = 80;
    CHECK(pick(p, s).reason == ETCH_POLICY_REASON_COOLDOWN);
    s.now_ms += 30000;
    CHECK(pick(p, s).index == LARGE);
    etch_policy_destroy(p);

    /* the margin: large predicted at 50 of 60 holds, at 48 (= 80%) steps up */
    p = make(two, 2, &c);
    pick(p, sig(0, 3, 1)); /* small */
    CHECK_OK(etch_policy_observe(p, LARGE, 0, 50));
    CHECK(pick(p, sig(100000, 0, 1)).reason == ETCH_POLICY_REASON_STEADY);
    etch_policy_destroy(p);
    p = make(two, 2, &c);
    pick(p, sig(0, 3, 1));
    CHECK_OK(etch_policy_observe(p, LARGE, 0, 48));
    CHECK(pick(p, sig(100000, 0, 1)).reason == ETCH_POLICY_REASON_COOLDOWN);
    CHECK(pick(p, sig(130000, 0, 1)).index == LARGE);
    etch_policy_destroy(p);

    /* per-request cost and tokens: 100 + 2 * 10 tokens = 120 > 110 */
    etch_policy_variant v[2] = {
        {.name = "big", .cost_ms_per_token = 10, .cost_ms_per_request = 100,
         .memory_bytes = 2, .quality = 9},
        {.name = "tiny", .cost_ms_per_token = 1, .cost_ms_per_request = 20,
         .memory_bytes = 1, .quality = 3},
    };
    p = make(v, 2, &c);
    s = sig(0, 0, 1);
    s.tokens = 2;
    s.latency_budget_ms = 110;
    d = pick(p, s);
    CHECK(d.index == 1);
    CHECK_NEAR(d.predicted_ms, 22, 1e-12);
    s.tokens = 1;
    s.now_ms = 1;
    CHECK_NEAR(pick(p, s).predicted_ms, 21, 1e-12);
    etch_policy_destroy(p);

    /* nothing below is faster: stay, and say so */
    p = make(two, 2, &c);
    s = sig(0, 0, 1);
    s.latency_budget_ms = 100;
    pick(p, s);
    pick(p, sig(1, 3, 1)); /* small */
    CHECK_OK(etch_policy_observe(p, SMALL, 2, 70));
    d = pick(p, sig(3, 2, 1));
    CHECK(d.index == SMALL && d.reason == ETCH_POLICY_REASON_LATENCY && !d.switched);
    CHECK_MSG(strstr(d.text, "nothing below is faster") != NULL, "%s", d.text);
    etch_policy_destroy(p);

    /* an unknown prior (0) is predicted free until measured */
    etch_policy_variant u[2] = {two[0], two[1]};
    u[0].cost_ms_per_token = 0;
    p = make(u, 2, &c);
    s = sig(0, 0, 1);
    s.latency_budget_ms = 1;
    d = pick(p, s);
    CHECK(d.index == LARGE && d.predicted_ms == 0);
    CHECK_OK(etch_policy_observe(p, LARGE, 0, 20));
    s.now_ms = 1;
    CHECK(pick(p, s).index == SMALL); /* over budget; small (15) is the faster */
    etch_policy_destroy(p);
}

static void test_relax(void) {
    /* a measurement not refreshed relaxes toward the prior with the half-life */
    etch_policy *p = make(two, 2, NULL); /* half-life 60 s */
    CHECK_OK(etch_policy_observe(p, LARGE, 1000, 100));
    CHECK_NEAR(etch_policy_estimate(p, LARGE, 1000), 100, 1e-9);
    CHECK_NEAR(etch_policy_estimate(p, LARGE, 61000), 70, 1e-9);  /* 40 + 60 / 2 */
    CHECK_NEAR(etch_policy_estimate(p, LARGE, 121000), 55, 1e-9); /* 40 + 60 / 4 */
    /* the next sample averages with the relaxed value: 70 + 0.3 * (40 - 70) */
    CHECK_OK(etch_policy_observe(p, LARGE, 61000, 40));
    CHECK_NEAR(etch_policy_estimate(p, LARGE, 61000), 61, 1e-9);
    CHECK_NEAR(etch_policy_estimate(p, SMALL, 61000), 15, 1e-12); /* never measured */
    etch_policy_destroy(p);
}

static void test_reason_str(void) {
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_START), "start") == 0);
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_STEADY), "steady") == 0);
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_COOLDOWN), "cooldown") == 0);
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_STEP_UP), "step_up") == 0);
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_MEMORY), "memory") == 0);
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_THERMAL), "thermal") == 0);
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_BATTERY), "battery") == 0);
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_LATENCY), "latency") == 0);
    CHECK(strcmp(etch_policy_reason_str(ETCH_POLICY_REASON_NOTHING_FITS), "nothing_fits") == 0);
    CHECK(strcmp(etch_policy_reason_str((etch_policy_reason)99), "unknown") == 0);
}

/* ---- the simulated thermal trace ---------------------------------------------------------- */

/* A chat on a phone: a turn every 5 s. The SoC heats up, a background job slows the large
 * model at 25 s (90 ms per token: over the 60 ms budget), the phone throttles (thermal 3-4),
 * then cools down; a brief warm spell at 125 s interrupts the cool-down. lat[] is what a
 * request on each variant would measure at that moment (only the served one is reported). */
typedef struct sample {
    int64_t t_ms;
    double thermal, battery;
    double lat[2];
} sample;

static const sample trace[] = {
    {0, 0.0, 0.90, {40, 15}}, {5000, 0.5, 0.89, {42, 15}},
    {10000, 1.0, 0.88, {45, 16}}, {15000, 1.5, 0.87, {50, 17}},
    {20000, 2.0, 0.86, {55, 18}}, {25000, 2.0, 0.85, {120, 19}},
    {30000, 2.0, 0.84, {120, 19}}, {35000, 2.5, 0.83, {110, 20}},
    {40000, 3.0, 0.82, {99, 22}}, {45000, 3.5, 0.81, {99, 24}},
    {50000, 4.0, 0.80, {99, 26}}, {55000, 3.5, 0.79, {99, 25}},
    {60000, 3.0, 0.78, {99, 23}}, {70000, 2.5, 0.77, {80, 21}},
    {80000, 2.0, 0.76, {70, 20}}, {90000, 1.5, 0.75, {60, 18}},
    {100000, 1.0, 0.74, {50, 17}}, {110000, 1.0, 0.74, {48, 16}},
    {120000, 0.5, 0.73, {45, 16}}, {130000, 0.5, 0.73, {44, 16}},
    {135000, 0.5, 0.72, {43, 15}}, {140000, 0.5, 0.72, {43, 15}},
    {145000, 1.5, 0.72, {46, 16}}, {150000, 1.0, 0.71, {44, 15}},
    {155000, 0.5, 0.71, {42, 15}}, {160000, 0.5, 0.70, {41, 15}},
    {165000, 0.5, 0.70, {41, 15}}, {170000, 0.5, 0.70, {41, 15}},
    {175000, 0.3, 0.69, {40, 15}}, {180000, 0.3, 0.69, {40, 15}},
    {185000, 0.0, 0.69, {40, 15}}, {190000, 2.9, 0.68, {44, 16}},
    {195000, 2.0, 0.68, {42, 15}}, {200000, 0.0, 0.67, {40, 15}},
};
#define NTRACE (sizeof trace / sizeof trace[0])

static void test_trace(void) {
    etch_policy *p = make(two, 2, NULL); /* defaults: cool-down 30 s, thermal 3 / 1 */
    char got[NTRACE + 1];
    etch_policy_reason why[NTRACE];
    int64_t last_move = 0;
    int switches = 0;
    double prev_lat = 0;
    size_t prev_index = 0;
    for (size_t k = 0; k < NTRACE; k++) {
        const sample *x = &trace[k];
        etch_policy_decision d = pick(p, sig(x->t_ms, x->thermal, x->battery));
        if (getenv("POLICY_TRACE"))
            fprintf(stderr, "%3zu %6lld %c %s\n", k, (long long)x->t_ms,
                    d.index ? 'S' : 'L', d.text);
        got[k] = d.index == LARGE ? 'L' : 'S';
        why[k] = d.reason;
        if (k > 0) {
            CHECK(d.previous == prev_index);
            if (d.switched) {
                switches++;
                /* never back up sooner than the cool-down after the previous move */
                if (d.index == LARGE)
                    CHECK_MSG(x->t_ms - last_move >= 30000, "up at %lld, moved at %lld",
                              (long long)x->t_ms, (long long)last_move);
                last_move = x->t_ms;
            }
            /* a violation seen at the previous request moves down at this one */
            if (prev_index == LARGE && prev_lat > 60 && x->thermal < 3)
                CHECK_MSG(d.index == SMALL && d.reason == ETCH_POLICY_REASON_LATENCY,
                          "request %zu at %lld: %s", k, (long long)x->t_ms, d.text);
        }
        /* hot: never the large one (the violation is seen at this very request) */
        if (x->thermal >= 3)
            CHECK_MSG(d.index == SMALL, "request %zu at %lld: %s", k, (long long)x->t_ms,
                      d.text);
        CHECK_OK(etch_policy_observe(p, d.index, x->t_ms + 1000, x->lat[d.index]));
        prev_lat = x->lat[d.index];
        prev_index = d.index;
    }
    got[NTRACE] = 0;
    /* 0-25 s large; the 120-ms turn at 25 s moves to small at 30 s (the latency rule); hot
     * from 40 to 60 s; from 100 s cool enough, but large's estimate (67.5 ms after that turn)
     * relaxes toward its 40-ms prior and is under 80% of the budget only at 140 s: the
     * cool-down starts; the warm spell at 145 s (thermal 1.5) restarts it at 150 s; large
     * again at 180 s; the 2.9 spell at 190 s is below the down level: large stays */
    const char *want = "LLLLLLSSSSSSSSSSSSSSSSSSSSSSSLLLLL";
    CHECK_MSG(strcmp(got, want) == 0, "choices\n got  %s\n want %s", got, want);
    CHECK(switches == 2);
    CHECK(why[6] == ETCH_POLICY_REASON_LATENCY);
    CHECK(why[8] == ETCH_POLICY_REASON_THERMAL);
    CHECK(why[16] == ETCH_POLICY_REASON_STEADY);   /* 100 s: large's estimate still high */
    CHECK(why[20] == ETCH_POLICY_REASON_STEADY);   /* 135 s: 48.2 ms > 48 */
    CHECK(why[21] == ETCH_POLICY_REASON_COOLDOWN); /* 140 s */
    CHECK(why[22] == ETCH_POLICY_REASON_STEADY);   /* 145 s: thermal 1.5 */
    CHECK(why[23] == ETCH_POLICY_REASON_COOLDOWN); /* 150 s: restarted */
    CHECK(why[28] == ETCH_POLICY_REASON_COOLDOWN); /* 175 s: 25 of 30 s */
    CHECK(why[29] == ETCH_POLICY_REASON_STEP_UP);  /* 180 s */
    CHECK(got[NTRACE - 1] == 'L');

    /* the same trace again decides the same way */
    etch_policy *q = make(two, 2, NULL);
    char again[NTRACE + 1];
    for (size_t k = 0; k < NTRACE; k++) {
        etch_policy_decision d = pick(q, sig(trace[k].t_ms, trace[k].thermal, trace[k].battery));
        again[k] = d.index == LARGE ? 'L' : 'S';
        CHECK_OK(etch_policy_observe(q, d.index, trace[k].t_ms + 1000, trace[k].lat[d.index]));
    }
    again[NTRACE] = 0;
    CHECK(strcmp(again, got) == 0);
    etch_policy_destroy(q);
    etch_policy_destroy(p);

    /* without hysteresis (up level just under the down level, no cool-down) the same trace
     * flaps: the defaults are what keeps it steady */
    etch_policy_config c = etch_policy_default_config();
    c.thermal_up = 2.95;
    c.cooldown_ms = 0;
    c.latency_margin = 0;
    p = make(two, 2, &c);
    int flaps = 0;
    for (size_t k = 0; k < NTRACE; k++) {
        etch_policy_decision d = pick(p, sig(trace[k].t_ms, trace[k].thermal, trace[k].battery));
        flaps += d.switched;
        CHECK_OK(etch_policy_observe(p, d.index, trace[k].t_ms + 1000, trace[k].lat[d.index]));
    }
    CHECK_MSG(flaps > 2, "%d switches", flaps);
    etch_policy_destroy(p);
}

int main(void) {
    test_create_errors();
    test_signal_errors();
    test_start();
    test_memory();
    test_thermal();
    test_battery();
    test_latency_and_ewma();
    test_relax();
    test_reason_str();
    test_trace();
    return etch_test_finish();
}
