/* The module layer: a program (plus optional .ptd) and the methods loaded from it, with all
 * method memory allocated here, once, at load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/backends.h"
#include "etch/kernels.h"
#include "etch/module.h"
#include "etch/threadpool.h"
#include "runtime/error.h"

#define MODULE_MAX_METHODS 32
#define MODULE_DEFAULT_TEMP ((size_t)16 << 20)

typedef struct module_method {
    char *name;
    etch_method *method;
    void *pool;
    void **arenas;
    size_t *arena_sizes;
    size_t num_arenas;
    void *temp;
} module_method;

struct etch_module {
    etch_program *program;
    etch_data_map *data_map;
    etch_module_options opts;
    etch_threadpool *pool; /* NULL: serial */
    module_method methods[MODULE_MAX_METHODS];
    size_t num_methods;
};

etch_module_options etch_module_default_options(void) {
    etch_module_options o;
    memset(&o, 0, sizeof o);
    o.load_mode = ETCH_LOAD_MMAP;
    o.data_path = NULL;
    o.temp_size = MODULE_DEFAULT_TEMP;
    o.num_threads = 1;
    o.kernels = ETCH_MODULE_KERNELS_OPTIMIZED;
    return o;
}

const char *etch_module_kernels_name(etch_module_kernels kernels) {
    switch (kernels) {
    case ETCH_MODULE_KERNELS_OPTIMIZED: return "optimized";
    case ETCH_MODULE_KERNELS_PORTABLE: return "portable";
    case ETCH_MODULE_KERNELS_REGISTERED: return "registered";
    }
    return "unknown";
}

int etch_module_num_threads(const etch_module *mod) {
    return mod ? etch_threadpool_num_threads(mod->pool) : 1;
}

/* True when some optimized kernel is registered (newest first: they come last). */
static bool optimized_registered(void) {
    for (size_t i = etch_kernels_count(); i-- > 0;) {
        const char *impl = etch_kernels_impl_of(etch_kernels_at(i));
        if (impl && strcmp(impl, "optimized") == 0)
            return true;
    }
    return false;
}

static etch_status register_kernels(etch_module_kernels kernels, bool no_backends) {
    if (kernels != ETCH_MODULE_KERNELS_REGISTERED && !no_backends) {
        etch_status st = etch_backends_register_builtin();
        if (st)
            return st;
    }
    switch (kernels) {
    case ETCH_MODULE_KERNELS_OPTIMIZED:
        return etch_kernels_register_optimized();
    case ETCH_MODULE_KERNELS_PORTABLE:
        if (optimized_registered())
            return etch_err(ETCH_ERR_INVALID_STATE,
                            "module: portable kernels only were asked for, but the optimized "
                            "kernels are already registered in this process (the kernel "
                            "registry is process-wide)");
        return etch_kernels_register_portable();
    case ETCH_MODULE_KERNELS_REGISTERED:
        return ETCH_OK;
    }
    return etch_err(ETCH_ERR_INVALID_ARGUMENT, "module: unknown kernels choice %d",
                    (int)kernels);
}

/* Cache-line (64-byte) aligned, size rounded up to 64; a zero-size request still gets a valid
 * pointer. Arenas start on a cache line, so that a planned tensor at an offset that is a
 * multiple of 64 (most of a CNN's: their sizes are) does too, and the SIMD kernels' aligned
 * vectors do not straddle two lines (measured: mobilenet_v2 and resnet18 1-2.5% faster than
 * in 16-byte aligned arenas, which glibc places 16 bytes past a page). */
static void *alloc64(size_t size) {
    if (size > SIZE_MAX - 63)
        return NULL;
    size_t n = (size + 63) & ~(size_t)63;
    return aligned_alloc(64, n ? n : 64);
}

static etch_status module_init(etch_module *mod, const etch_module_options *opts) {
    mod->opts = opts ? *opts : etch_module_default_options();
    if (mod->opts.num_threads < 0 || mod->opts.num_threads > ETCH_THREADPOOL_MAX_THREADS)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "module: num_threads %d is outside [0, %d]", mod->opts.num_threads,
                        ETCH_THREADPOOL_MAX_THREADS);
    etch_status st = register_kernels(mod->opts.kernels, mod->opts.no_backends);
    if (st != ETCH_OK)
        return st;
    if (mod->opts.num_threads > 1 &&
        (st = etch_threadpool_create(mod->opts.num_threads, &mod->pool)) != ETCH_OK)
        return st;
    if (mod->opts.data_path) {
        etch_program_options po = etch_program_default_options();
        po.load_mode = mod->opts.load_mode;
        st = etch_data_map_open_file(mod->opts.data_path, &po, &mod->data_map);
        if (st != ETCH_OK)
            return st;
    }
    mod->opts.data_path = NULL; /* not kept: the caller's string may not outlive us */
    return ETCH_OK;
}

etch_status etch_module_open(const char *path, const etch_module_options *opts,
                             etch_module **out) {
    if (!path || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "module_open: NULL argument");
    etch_module *mod = calloc(1, sizeof *mod);
    if (!mod)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "module_open: out of memory");
    etch_status st = module_init(mod, opts);
    if (st == ETCH_OK) {
        etch_program_options po = etch_program_default_options();
        po.load_mode = mod->opts.load_mode;
        st = etch_program_open_file(path, &po, &mod->program);
    }
    if (st != ETCH_OK) {
        etch_module_close(mod);
        return st;
    }
    *out = mod;
    return ETCH_OK;
}

etch_status etch_module_open_buffer(const void *data, size_t size,
                                    const etch_module_options *opts, etch_module **out) {
    if (!data || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "module_open_buffer: NULL argument");
    etch_module *mod = calloc(1, sizeof *mod);
    if (!mod)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "module_open_buffer: out of memory");
    etch_status st = module_init(mod, opts);
    if (st == ETCH_OK) {
        etch_program_options po = etch_program_default_options();
        po.load_mode = mod->opts.load_mode;
        st = etch_program_open_buffer(data, size, &po, &mod->program);
    }
    if (st != ETCH_OK) {
        etch_module_close(mod);
        return st;
    }
    *out = mod;
    return ETCH_OK;
}

static void method_slot_free(module_method *mm) {
    etch_method_free(mm->method);
    for (size_t j = 0; mm->arenas && j < mm->num_arenas; j++)
        free(mm->arenas[j]);
    free(mm->arenas);
    free(mm->arena_sizes);
    free(mm->pool);
    free(mm->temp);
    free(mm->name);
    memset(mm, 0, sizeof *mm);
}

void etch_module_close(etch_module *mod) {
    if (!mod)
        return;
    /* Methods first: they refer to the program and the data map. */
    for (size_t i = 0; i < mod->num_methods; i++)
        method_slot_free(&mod->methods[i]);
    etch_program_close(mod->program);
    if (mod->data_map)
        etch_data_map_close(mod->data_map);
    etch_threadpool_destroy(mod->pool);
    free(mod);
}

const etch_program *etch_module_program(const etch_module *mod) {
    return mod ? mod->program : NULL;
}

const etch_data_map *etch_module_data_map(const etch_module *mod) {
    return mod ? mod->data_map : NULL;
}

static etch_status oom(const char *method, const char *what, size_t size) {
    return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                    "method '%s': cannot allocate %zu bytes for %s", method, size, what);
}

etch_status etch_module_load_method(etch_module *mod, const char *name, etch_method **out) {
    if (!mod || !name || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "module_load_method: NULL argument");
    for (size_t i = 0; i < mod->num_methods; i++) {
        if (strcmp(mod->methods[i].name, name) == 0) {
            *out = mod->methods[i].method;
            return ETCH_OK;
        }
    }
    if (mod->num_methods == MODULE_MAX_METHODS)
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                        "module: cannot load more than %d methods", MODULE_MAX_METHODS);

    etch_method_meta meta;
    etch_status st = etch_program_method_meta(mod->program, name, &meta);
    if (st != ETCH_OK)
        return st;
    if (meta.fallback_from && !mod->opts.quiet_fallback)
        fprintf(stderr,
                "etch: method '%s' delegates to a backend this build lacks or cannot use here; "
                "running its CPU twin '%s' instead\n",
                meta.fallback_from, etch_method_meta_name(&meta));
    if (etch_method_meta_needs_external_data(&meta) && !mod->data_map)
        return etch_err(ETCH_ERR_NOT_FOUND,
                        "method '%s' needs external tensor data (a .ptd file) and the module "
                        "was opened without one (etch_module_options.data_path)",
                        name);

    module_method mm;
    memset(&mm, 0, sizeof mm);
    size_t name_len = strlen(name);
    size_t pool_size = etch_method_meta_pool_size(&meta);
    size_t temp_size = mod->opts.temp_size;
    mm.num_arenas = etch_method_meta_num_arenas(&meta);
    mm.name = malloc(name_len + 1);
    mm.pool = alloc64(pool_size);
    if (!mm.name || !mm.pool) {
        st = oom(name, "the method pool", pool_size);
        goto fail;
    }
    memcpy(mm.name, name, name_len + 1);
    if (mm.num_arenas) {
        mm.arenas = calloc(mm.num_arenas, sizeof *mm.arenas);
        mm.arena_sizes = calloc(mm.num_arenas, sizeof *mm.arena_sizes);
        if (!mm.arenas || !mm.arena_sizes) {
            st = oom(name, "the arena table", mm.num_arenas * sizeof(void *));
            goto fail;
        }
        for (size_t j = 0; j < mm.num_arenas; j++) {
            mm.arena_sizes[j] = etch_method_meta_arena_size(&meta, j);
            mm.arenas[j] = alloc64(mm.arena_sizes[j]);
            if (!mm.arenas[j]) {
                char what[48];
                snprintf(what, sizeof what, "planned arena %zu", j + 1);
                st = oom(name, what, mm.arena_sizes[j]);
                goto fail;
            }
        }
    }
    if (temp_size) {
        mm.temp = alloc64(temp_size);
        if (!mm.temp) {
            st = oom(name, "kernel scratch", temp_size);
            goto fail;
        }
    }

    etch_method_memory mem;
    memset(&mem, 0, sizeof mem);
    mem.pool = mm.pool;
    mem.pool_size = pool_size;
    mem.arenas = mm.arenas;
    mem.arena_sizes = mm.arena_sizes;
    mem.num_arenas = mm.num_arenas;
    mem.temp = mm.temp;
    mem.temp_size = mm.temp ? temp_size : 0;
    etch_method_options mo;
    memset(&mo, 0, sizeof mo);
    mo.external_data = mod->data_map;
    mo.threadpool = etch_threadpool_get_iface(mod->pool); /* NULL when serial */
    mo.no_fusion = mod->opts.no_fusion;
    mo.no_prepack = mod->opts.no_prepack;
    mo.no_blocked_layout = mod->opts.no_blocked_layout;
    st = etch_method_load(mod->program, name, &mem, &mo, &mm.method);
    if (st != ETCH_OK)
        goto fail;
    mod->methods[mod->num_methods++] = mm;
    *out = mm.method;
    return ETCH_OK;

fail:
    method_slot_free(&mm);
    return st;
}

etch_status etch_module_default_method(const etch_module *mod, const char **name) {
    if (!mod || !name)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "module_default_method: NULL argument");
    size_t n = etch_program_num_methods(mod->program);
    for (size_t i = 0; i < n; i++) {
        const char *m = etch_program_method_name(mod->program, i);
        if (m && strcmp(m, "forward") == 0) {
            *name = m;
            return ETCH_OK;
        }
    }
    if (n == 1) {
        *name = etch_program_method_name(mod->program, 0);
        return ETCH_OK;
    }
    if (n == 0)
        return etch_err(ETCH_ERR_NOT_FOUND, "the program has no methods");
    char list[768];
    size_t len = 0;
    list[0] = 0;
    for (size_t i = 0; i < n && len < sizeof list; i++) {
        int w = snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "",
                         etch_program_method_name(mod->program, i));
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (len >= sizeof list)
        memcpy(list + sizeof list - 4, "...", 4);
    return etch_err(ETCH_ERR_NOT_FOUND,
                    "no 'forward' method and %zu methods to choose from: %s (pick one)", n,
                    list);
}
