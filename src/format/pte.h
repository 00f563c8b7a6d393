/*
 * The .pte container: identifier, extended header, segments, and a verifier that checks
 * every offset, length and index of the Program flatbuffer before the runtime trusts it.
 * After etch_pte_open succeeds, the accessors in flatbuf.h cannot fail on this buffer for
 * anything the verifier covered (which is everything the runtime reads).
 */
#ifndef ETCH_FORMAT_PTE_H
#define ETCH_FORMAT_PTE_H

#include "etch/status.h"
#include "format/flatbuf.h"
#include "format/schema.h"

#define ETCH_PTE_MAX_RANK 16

typedef struct etch_pte_header {
    bool present;                 /* "eh00" found at offset 8 */
    uint32_t length;              /* 24 or 32 (or more) */
    uint64_t program_size;
    uint64_t segment_base_offset; /* 0: no segments */
    uint64_t segment_data_size;
} etch_pte_header;

/* A byte range inside the image. */
typedef struct etch_range {
    const uint8_t *data;
    uint64_t size;
} etch_range;

typedef struct etch_pte {
    const uint8_t *image;   /* whole file image */
    size_t image_size;
    etch_pte_header header;
    fb_buf fb;              /* the flatbuffer: image[0, program_size) */
    fb_table root;
    fb_vec plans;           /* [ExecutionPlan] */
    fb_vec segments;        /* [DataSegment] (pos 0 when absent) */
    fb_vec constant_buffer; /* legacy [Buffer] */
    fb_vec constant_offsets;/* constant_segment.offsets [uint64] */
    etch_range constant_segment; /* the constant segment's bytes (size 0 if none) */
    bool legacy_constants;  /* constants come from constant_buffer */
    fb_vec delegate_data;   /* [BackendDelegateInlineData] */
    fb_vec mutable_offsets; /* mutable_data_segments[0].offsets */
    etch_range mutable_segment;
    fb_vec named_data;      /* [NamedData] */
    uint64_t work_left;     /* verification's element budget (see spend() in pte.c) */
} etch_pte;

/* Classify the first bytes: ETCH_OK for "ET12"; ETCH_ERR_INCOMPATIBLE_VERSION for another
 * "ET.." identifier; ETCH_ERR_NOT_A_PROGRAM otherwise. */
etch_status etch_pte_identify(const uint8_t *data, size_t size);
/* Parse the optional eh00 header (needs only the first 40 bytes). */
etch_status etch_pte_read_header(const uint8_t *data, size_t size, etch_pte_header *out);
/* Identify, parse the header, check the segment area against the file size and verify the
 * whole flatbuffer. `data` must be 16-byte aligned. Errors name the byte offset. */
etch_status etch_pte_open(const uint8_t *data, size_t size, etch_pte *out);

/* Segment i as a range of the image (verified at open). */
etch_range etch_pte_segment(const etch_pte *p, uint32_t i);
/* Bytes of constant i (data_buffer_idx) — at most `limit` readable bytes from its start. */
bool etch_pte_constant(const etch_pte *p, uint32_t idx, etch_range *out);

/* Embedded program of a BP08 bundled program; false (with fb->failed info) if malformed. */
bool etch_bpte_program(const uint8_t *data, size_t size, const uint8_t **prog, size_t *prog_size,
                       size_t *err_offset, const char **err_what);

/* Element count and byte size of a serialized tensor (verified: no overflow). */
typedef struct etch_tensor_desc {
    int dtype;
    int rank;
    int32_t sizes[ETCH_PTE_MAX_RANK];
    uint8_t dim_order[ETCH_PTE_MAX_RANK];
    int dynamism;
    uint64_t numel;
    uint64_t nbytes;
    uint32_t data_buffer_idx;
    bool planned;
    uint32_t memory_id;
    uint64_t memory_offset;
    bool external;
    const char *fqn;
} etch_tensor_desc;

/* Read a verified Tensor table. */
void etch_pte_tensor_desc(const fb_table *tensor, etch_tensor_desc *out);

#endif
