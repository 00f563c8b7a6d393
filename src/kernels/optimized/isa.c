/* Instruction-set selection for the optimized kernels: what the build has, what the CPU (and
 * its OS) supports, and the override from ETCH_ISA or etch_isa_set. */
#include <stdlib.h>
#include <string.h>

#include "etch/kernels.h"
#include "kernels/optimized/opt.h"
#include "runtime/error.h"

static const char *const isa_names[] = {"scalar", "avx2", "avx512", "neon"};

const char *etch_isa_name(etch_isa isa) {
    return (unsigned)isa < sizeof isa_names / sizeof isa_names[0] ? isa_names[isa] : "unknown";
}

etch_status etch_isa_parse(const char *name, etch_isa *out) {
    for (unsigned i = 0; name && i < sizeof isa_names / sizeof isa_names[0]; i++)
        if (strcmp(name, isa_names[i]) == 0) {
            *out = (etch_isa)i;
            return ETCH_OK;
        }
    return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                    "unknown instruction set '%s' (expected scalar, avx2, avx512 or neon)",
                    name ? name : "(null)");
}

bool etch_isa_supported(etch_isa isa) {
    switch (isa) {
    case ETCH_ISA_SCALAR:
        return true;
#if ETCH_OPT_X86
    case ETCH_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case ETCH_ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
#endif
#if ETCH_OPT_NEON
    case ETCH_ISA_NEON:
        return true; /* Advanced SIMD is part of the arm64 base architecture */
#endif
    default:
        return false;
    }
}

etch_isa etch_isa_best(void) {
    if (etch_isa_supported(ETCH_ISA_AVX512))
        return ETCH_ISA_AVX512;
    if (etch_isa_supported(ETCH_ISA_AVX2))
        return ETCH_ISA_AVX2;
    if (etch_isa_supported(ETCH_ISA_NEON))
        return ETCH_ISA_NEON;
    return ETCH_ISA_SCALAR;
}

static int active_isa = -1;

etch_isa etch_isa_active(void) {
    if (active_isa < 0)
        active_isa = (int)etch_isa_best();
    return (etch_isa)active_isa;
}

etch_status etch_isa_set(etch_isa isa) {
    if (!etch_isa_supported(isa))
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "instruction set '%s' is not available (not built in, or this CPU "
                        "lacks it); this machine supports up to '%s'",
                        etch_isa_name(isa), etch_isa_name(etch_isa_best()));
    active_isa = (int)isa;
    return ETCH_OK;
}

etch_status etch_opt_select_isa_from_env(void) {
    const char *v = getenv("ETCH_ISA");
    if (!v || !*v) {
        if (active_isa < 0)
            active_isa = (int)etch_isa_best();
        return ETCH_OK;
    }
    etch_isa isa;
    etch_status st = etch_isa_parse(v, &isa);
    if (st == ETCH_OK)
        st = etch_isa_set(isa);
    if (st != ETCH_OK) {
        etch_err_prefix("ETCH_ISA=%s", v);
        return ETCH_ERR_NOT_SUPPORTED;
    }
    return ETCH_OK;
}
