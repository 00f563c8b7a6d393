/* Method metadata, read from the verified program before (or without) loading. */
#include <stdio.h>
#include <string.h>

#include "etch/backend.h"
#include "runtime/error.h"
#include "runtime/program_impl.h"

static bool plan_backends_available(const etch_program *p, uint32_t index) {
    fb_table plan, del;
    fb_vec dels;
    etch_program_plan(p, index, &plan);
    if (!fb_vec_field(&plan, PLAN_DELEGATES, 4, 4, &dels))
        return true;
    for (uint32_t i = 0; i < dels.len; i++) {
        const char *id;
        uint32_t len;
        fb_vec_table(&dels, i, &del);
        fb_str_field(&del, DELEGATE_ID, &id, &len);
        const etch_backend *b = etch_backends_find(id, len);
        if (!b || (b->is_available && !b->is_available(b->user_data)))
            return false;
    }
    return true;
}

bool etch_method_meta_backends_available(const etch_method_meta *m) {
    return m && m->program && plan_backends_available(m->program, m->index);
}

static int find_plan(const etch_program *p, const char *name, size_t len) {
    for (uint32_t i = 0; i < p->pte.plans.len; i++) {
        const char *n = etch_program_method_name(p, i);
        if (n && strlen(n) == len && memcmp(n, name, len) == 0)
            return (int)i;
    }
    return -1;
}

etch_status etch_program_method_meta(const etch_program *p, const char *name,
                                     etch_method_meta *out) {
    if (!p || !name || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method_meta: NULL argument");
    int i = find_plan(p, name, strlen(name));
    if (i >= 0) {
        out->program = p;
        out->index = (uint32_t)i;
        out->fallback_from = NULL;
        if (!plan_backends_available(p, (uint32_t)i)) {
            char twin[256];
            int n = snprintf(twin, sizeof twin, "%s%s", name, ETCH_CPU_TWIN_SUFFIX);
            int t = n > 0 && (size_t)n < sizeof twin ? find_plan(p, twin, (size_t)n) : -1;
            if (t >= 0 && plan_backends_available(p, (uint32_t)t)) {
                out->index = (uint32_t)t;
                out->fallback_from = etch_program_method_name(p, (uint32_t)i);
            }
        }
        return ETCH_OK;
    }
    char list[512];
    size_t o = 0;
    list[0] = 0;
    for (uint32_t k = 0; k < p->pte.plans.len && o < sizeof list - 1; k++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", k ? ", " : "",
                              etch_program_method_name(p, k));
    return etch_err(ETCH_ERR_NOT_FOUND, "no method '%s' (methods: %s)", name, list);
}

static void plan_of(const etch_method_meta *m, fb_table *plan) {
    etch_program_plan(m->program, m->index, plan);
}

static fb_vec plan_vec(const etch_method_meta *m, unsigned slot, size_t es) {
    fb_table plan;
    fb_vec v;
    plan_of(m, &plan);
    fb_vec_field(&plan, slot, es, 4, &v);
    return v;
}

const char *etch_method_meta_name(const etch_method_meta *m) {
    return etch_program_method_name(m->program, m->index);
}

size_t etch_method_meta_num_inputs(const etch_method_meta *m) {
    return plan_vec(m, PLAN_INPUTS, 4).len;
}
size_t etch_method_meta_num_outputs(const etch_method_meta *m) {
    return plan_vec(m, PLAN_OUTPUTS, 4).len;
}
size_t etch_method_meta_num_values(const etch_method_meta *m) {
    return plan_vec(m, PLAN_VALUES, 4).len;
}

size_t etch_method_meta_num_instructions(const etch_method_meta *m) {
    fb_vec chains = plan_vec(m, PLAN_CHAINS, 4);
    size_t n = 0;
    for (uint32_t c = 0; c < chains.len; c++) {
        fb_table ch;
        fb_vec ins;
        fb_vec_table(&chains, c, &ch);
        fb_vec_field(&ch, CHAIN_INSTRUCTIONS, 4, 4, &ins);
        n += ins.len;
    }
    return n;
}

size_t etch_method_meta_num_arenas(const etch_method_meta *m) {
    fb_vec v = plan_vec(m, PLAN_NON_CONST_BUFFER_SIZES, 8);
    return v.len ? v.len - 1 : 0;
}

size_t etch_method_meta_arena_size(const etch_method_meta *m, size_t i) {
    fb_vec v = plan_vec(m, PLAN_NON_CONST_BUFFER_SIZES, 8);
    return i + 1 < v.len ? (size_t)fb_vec_i64(&v, (uint32_t)(i + 1)) : 0;
}

/* Describe value `vi` of a plan. */
static void describe(const etch_method_meta *m, uint32_t vi, etch_value_info *out) {
    memset(out, 0, sizeof *out);
    fb_vec values = plan_vec(m, PLAN_VALUES, 4);
    fb_table ev, val;
    fb_vec_table(&values, vi, &ev);
    uint8_t kind = (uint8_t)fb_u(&ev, EVALUE_TYPE, 1, 0);
    fb_table_field(&ev, EVALUE_VAL, &val);
    out->value_index = vi;
    static const uint32_t tag_of[] = {
        [KT_NONE] = ETCH_VALUE_NONE, [KT_NULL] = ETCH_VALUE_NONE, [KT_INT] = ETCH_VALUE_INT,
        [KT_BOOL] = ETCH_VALUE_BOOL, [KT_DOUBLE] = ETCH_VALUE_DOUBLE,
        [KT_TENSOR] = ETCH_VALUE_TENSOR, [KT_STRING] = ETCH_VALUE_STRING,
        [KT_INT_LIST] = ETCH_VALUE_INT_LIST, [KT_DOUBLE_LIST] = ETCH_VALUE_DOUBLE_LIST,
        [KT_BOOL_LIST] = ETCH_VALUE_BOOL_LIST, [KT_TENSOR_LIST] = ETCH_VALUE_TENSOR_LIST,
        [KT_OPTIONAL_TENSOR_LIST] = ETCH_VALUE_OPTIONAL_TENSOR_LIST};
    out->tag = kind <= KT_OPTIONAL_TENSOR_LIST ? tag_of[kind] : ETCH_VALUE_NONE;
    switch (kind) {
    case KT_INT:
        out->int_val = fb_i(&val, SCALAR_VAL, 8, 0);
        break;
    case KT_BOOL:
        out->int_val = fb_u(&val, SCALAR_VAL, 1, 0) != 0;
        break;
    case KT_DOUBLE:
        out->double_val = fb_f64(&val, SCALAR_VAL, 0);
        break;
    case KT_TENSOR: {
        etch_tensor_desc d;
        etch_pte_tensor_desc(&val, &d);
        out->dtype = d.dtype;
        out->dim = (uint8_t)d.rank;
        for (int i = 0; i < d.rank; i++) {
            out->sizes[i] = d.sizes[i];
            out->dim_order[i] = d.dim_order[i];
        }
        out->dynamism = (uint8_t)d.dynamism;
        out->planned = d.planned;
        out->constant = !d.planned && (d.data_buffer_idx > 0 || d.external);
        out->nbytes = (size_t)d.nbytes;
        break;
    }
    default:
        break;
    }
}

static etch_status io_info(const etch_method_meta *m, unsigned slot, size_t i,
                           etch_value_info *out) {
    fb_vec v = plan_vec(m, slot, 4);
    if (i >= v.len)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "%s %zu out of range (method has %u)",
                        slot == PLAN_INPUTS ? "input" : "output", i, v.len);
    describe(m, (uint32_t)fb_vec_i32(&v, (uint32_t)i), out);
    return ETCH_OK;
}

etch_status etch_method_meta_input(const etch_method_meta *m, size_t i, etch_value_info *out) {
    return io_info(m, PLAN_INPUTS, i, out);
}
etch_status etch_method_meta_output(const etch_method_meta *m, size_t i, etch_value_info *out) {
    return io_info(m, PLAN_OUTPUTS, i, out);
}

size_t etch_method_meta_num_operators(const etch_method_meta *m) {
    return plan_vec(m, PLAN_OPERATORS, 4).len;
}

/* "name.overload" (or "name"), as the kernel registry keys it. */
void etch_operator_full_name(const fb_table *op, char *buf, size_t cap) {
    const char *name, *overload;
    uint32_t nlen, olen;
    fb_str_field(op, OPERATOR_NAME, &name, &nlen);
    fb_str_field(op, OPERATOR_OVERLOAD, &overload, &olen);
    if (overload && olen)
        snprintf(buf, cap, "%s.%s", name ? name : "", overload);
    else
        snprintf(buf, cap, "%s", name ? name : "");
}

etch_status etch_method_meta_operator(const etch_method_meta *m, size_t i,
                                      etch_operator_info *out) {
    fb_vec ops = plan_vec(m, PLAN_OPERATORS, 4);
    if (i >= ops.len)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "operator %zu out of range", i);
    memset(out, 0, sizeof *out);
    fb_table op;
    fb_vec_table(&ops, (uint32_t)i, &op);
    etch_operator_full_name(&op, out->name, sizeof out->name);
    out->available = etch_kernels_find(out->name, strlen(out->name)) != NULL;
    fb_vec chains = plan_vec(m, PLAN_CHAINS, 4);
    for (uint32_t c = 0; c < chains.len; c++) {
        fb_table ch;
        fb_vec ins;
        fb_vec_table(&chains, c, &ch);
        fb_vec_field(&ch, CHAIN_INSTRUCTIONS, 4, 4, &ins);
        for (uint32_t k = 0; k < ins.len; k++) {
            fb_table in, a;
            fb_vec_table(&ins, k, &in);
            if (fb_u(&in, INSTR_TYPE, 1, 0) != IA_KERNEL_CALL)
                continue;
            fb_table_field(&in, INSTR_ARGS, &a);
            if ((size_t)fb_i(&a, KERNEL_CALL_OP_INDEX, 4, 0) == i)
                out->num_calls++;
        }
    }
    return ETCH_OK;
}

size_t etch_method_meta_num_delegates(const etch_method_meta *m) {
    return plan_vec(m, PLAN_DELEGATES, 4).len;
}

/* The processed blob of a delegate entry. */
void etch_delegate_blob(const etch_program *p, const fb_table *del, const uint8_t **data,
                        size_t *size, bool *is_inline) {
    fb_table ref;
    fb_table_field(del, DELEGATE_PROCESSED, &ref);
    uint64_t loc = fb_u(&ref, DATAREF_LOCATION, 1, 0), idx = fb_u(&ref, DATAREF_INDEX, 4, 0);
    *is_inline = loc == DATA_LOCATION_INLINE;
    if (*is_inline) {
        fb_table inl;
        fb_vec v;
        fb_vec_table(&p->pte.delegate_data, (uint32_t)idx, &inl);
        fb_vec_field(&inl, INLINE_DATA_DATA, 1, 1, &v);
        *data = v.pos ? fb_vec_ptr(&v) : NULL;
        *size = v.len;
    } else {
        etch_range r = etch_pte_segment(&p->pte, (uint32_t)idx);
        *data = r.data;
        *size = (size_t)r.size;
    }
}

etch_status etch_method_meta_delegate(const etch_method_meta *m, size_t i,
                                      etch_delegate_info *out) {
    fb_vec dels = plan_vec(m, PLAN_DELEGATES, 4);
    if (i >= dels.len)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "delegate %zu out of range", i);
    memset(out, 0, sizeof *out);
    fb_table del;
    fb_vec specs;
    uint32_t len;
    const uint8_t *data;
    fb_vec_table(&dels, (uint32_t)i, &del);
    fb_str_field(&del, DELEGATE_ID, &out->id, &len);
    const etch_backend *b = etch_backends_find(out->id, len);
    out->available = b && (!b->is_available || b->is_available(b->user_data));
    etch_delegate_blob(m->program, &del, &data, &out->blob_size, &out->inline_blob);
    if (fb_vec_field(&del, DELEGATE_COMPILE_SPECS, 4, 4, &specs))
        out->num_compile_specs = specs.len;
    return ETCH_OK;
}

/* Value i as a tensor description; false for other kinds. */
static bool tensor_at(const fb_vec *values, uint32_t i, etch_tensor_desc *d) {
    fb_table ev, val;
    fb_vec_table(values, i, &ev);
    if (fb_u(&ev, EVALUE_TYPE, 1, 0) != KT_TENSOR)
        return false;
    fb_table_field(&ev, EVALUE_VAL, &val);
    etch_pte_tensor_desc(&val, d);
    return true;
}

static bool is_file_constant(const etch_tensor_desc *d) {
    return !d->planned && !d->external && d->data_buffer_idx > 0;
}

uint64_t etch_method_meta_constant_bytes(const etch_method_meta *m) {
    fb_vec values = plan_vec(m, PLAN_VALUES, 4);
    uint64_t total = 0;
    for (uint32_t i = 0; i < values.len; i++) {
        etch_tensor_desc d, d2;
        if (!tensor_at(&values, i, &d) || !is_file_constant(&d))
            continue;
        bool seen = false; /* count each shared buffer once */
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = tensor_at(&values, j, &d2) && is_file_constant(&d2) &&
                   d2.data_buffer_idx == d.data_buffer_idx;
        if (!seen)
            total += d.nbytes;
    }
    return total;
}

bool etch_method_meta_needs_external_data(const etch_method_meta *m) {
    fb_vec values = plan_vec(m, PLAN_VALUES, 4);
    etch_tensor_desc d;
    for (uint32_t i = 0; i < values.len; i++)
        if (tensor_at(&values, i, &d) && d.external)
            return true;
    return false;
}

/* ---- debug information (Chain.stacktrace; verified at open) ---------------------------- */

size_t etch_method_meta_num_chains(const etch_method_meta *m) {
    return m && m->program ? plan_vec(m, PLAN_CHAINS, 4).len : 0;
}

size_t etch_method_meta_chain_length(const etch_method_meta *m, size_t chain) {
    if (!m || !m->program)
        return 0;
    fb_vec chains = plan_vec(m, PLAN_CHAINS, 4);
    if (chain >= chains.len)
        return 0;
    fb_table ch;
    fb_vec ins;
    fb_vec_table(&chains, (uint32_t)chain, &ch);
    fb_vec_field(&ch, CHAIN_INSTRUCTIONS, 4, 4, &ins);
    return ins.len;
}

/* The frames of instruction `pc` (len 0: none); false for an instruction that is not there.
 * With `op`, also what it calls: operator name / backend id (else ""). */
static bool instruction_frames(const etch_method_meta *m, size_t chain, size_t pc,
                               fb_vec *frames, char *op, size_t cap) {
    memset(frames, 0, sizeof *frames);
    fb_vec chains = plan_vec(m, PLAN_CHAINS, 4);
    if (chain >= chains.len)
        return false;
    fb_table ch, fl;
    fb_vec ins, lists;
    fb_vec_table(&chains, (uint32_t)chain, &ch);
    fb_vec_field(&ch, CHAIN_INSTRUCTIONS, 4, 4, &ins);
    if (pc >= ins.len)
        return false;
    if (op) {
        fb_table in, a, t;
        fb_vec_table(&ins, (uint32_t)pc, &in);
        fb_table_field(&in, INSTR_ARGS, &a);
        uint64_t kind = fb_u(&in, INSTR_TYPE, 1, 0);
        op[0] = 0;
        if (kind == IA_KERNEL_CALL) {
            fb_vec ops = plan_vec(m, PLAN_OPERATORS, 4);
            fb_vec_table(&ops, (uint32_t)fb_i(&a, KERNEL_CALL_OP_INDEX, 4, 0), &t);
            etch_operator_full_name(&t, op, cap);
        } else if (kind == IA_DELEGATE_CALL) {
            fb_vec dels = plan_vec(m, PLAN_DELEGATES, 4);
            const char *id;
            uint32_t len;
            fb_vec_table(&dels, (uint32_t)fb_i(&a, DELEGATE_CALL_INDEX, 4, 0), &t);
            if (fb_str_field(&t, DELEGATE_ID, &id, &len))
                snprintf(op, cap, "%s", id);
        }
    }
    /* A list of another length than the chain's cannot be matched to its instructions. */
    if (!fb_vec_field(&ch, CHAIN_STACKTRACE, 4, 4, &lists) || lists.len != ins.len)
        return true;
    fb_vec_table(&lists, (uint32_t)pc, &fl);
    fb_vec_field(&fl, FRAME_LIST_ITEMS, 4, 4, frames);
    return true;
}

static const char *frame_str(const fb_table *fr, unsigned slot) {
    const char *s;
    uint32_t len;
    return fb_str_field(fr, slot, &s, &len) ? s : NULL;
}

static bool is_etch_frame(const fb_table *fr) {
    const char *f = frame_str(fr, FRAME_FILENAME);
    return f && strcmp(f, ETCH_DEBUG_FRAME_FILE) == 0;
}

etch_status etch_method_meta_instruction_debug(const etch_method_meta *m, size_t chain, size_t pc,
                                               etch_instruction_debug *out) {
    if (!m || !m->program || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method_meta_instruction_debug: NULL argument");
    fb_vec frames;
    char op[sizeof out->op_name];
    if (!instruction_frames(m, chain, pc, &frames, op, sizeof op))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method '%s': no instruction %zu in chain %zu",
                        etch_method_meta_name(m), pc, chain);
    memset(out, 0, sizeof *out);
    memcpy(out->op_name, op, sizeof op);
    uint32_t n = frames.len;
    fb_table fr;
    if (n && (fb_vec_table(&frames, n - 1, &fr), is_etch_frame(&fr))) {
        out->node = frame_str(&fr, FRAME_NAME);
        out->module_path = frame_str(&fr, FRAME_CONTEXT);
        if (!out->module_path)
            out->module_path = ""; /* no context: the root module's */
        n--;
    }
    out->num_frames = n;
    if (n) {
        fb_vec_table(&frames, n - 1, &fr);
        out->filename = frame_str(&fr, FRAME_FILENAME);
        out->lineno = (int32_t)fb_i(&fr, FRAME_LINENO, 4, 0);
        out->function = frame_str(&fr, FRAME_NAME);
        out->source = frame_str(&fr, FRAME_CONTEXT);
    }
    return ETCH_OK;
}

etch_status etch_method_meta_instruction_frame(const etch_method_meta *m, size_t chain, size_t pc,
                                               size_t i, etch_source_frame *out) {
    etch_instruction_debug d;
    etch_status st = etch_method_meta_instruction_debug(m, chain, pc, &d);
    if (st)
        return st;
    if (i >= d.num_frames)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "method '%s': instruction %zu of chain %zu has %zu source frames, not %zu",
                        etch_method_meta_name(m), pc, chain, d.num_frames, i + 1);
    fb_vec frames;
    fb_table fr;
    instruction_frames(m, chain, pc, &frames, NULL, 0);
    fb_vec_table(&frames, (uint32_t)i, &fr);
    memset(out, 0, sizeof *out);
    out->filename = frame_str(&fr, FRAME_FILENAME);
    out->lineno = (int32_t)fb_i(&fr, FRAME_LINENO, 4, 0);
    out->function = frame_str(&fr, FRAME_NAME);
    out->source = frame_str(&fr, FRAME_CONTEXT);
    return ETCH_OK;
}
