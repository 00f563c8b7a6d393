/* The .ptd external-data container (FlatTensor, identifier FT01, header FH01).
 *
 * Two schemas share the identifier and the header (FH01 at byte 8, segment offsets relative
 * to the header's segment_base_offset):
 *  - current: FlatTensor { version, segments, named_data: [NamedData { key, segment_index,
 *    tensor_layout }] } -- an entry is a whole segment;
 *  - legacy (ExecuTorch's writer of early 2025): FlatTensor { version, tensor_alignment,
 *    tensors: [TensorMetadata { fully_qualified_name, scalar_type, sizes, dim_order,
 *    segment_index, offset }], segments, (later also) named_data: [{ key, segment_index }] }
 *    -- a tensor lies at segment_base_offset + segments[segment_index].offset + offset, its
 *    size from its layout, and several tensors share one segment.
 * The root table tells them apart exactly: only the legacy schema has a field in slot 3
 * (its required `segments`); the current one has three fields. */
#ifndef ETCH_FORMAT_PTD_H
#define ETCH_FORMAT_PTD_H

#include "etch/status.h"
#include "format/flatbuf.h"
#include "format/pte.h"

typedef struct etch_ptd {
    const uint8_t *image;
    size_t image_size;
    uint64_t segment_base_offset;
    uint64_t segment_data_size;
    fb_buf fb;
    fb_table root;
    fb_vec segments;   /* [DataSegment] */
    fb_vec named_data; /* [NamedData{key, segment_index, tensor_layout}] (legacy: {key,
                          segment_index}; may be absent) */
    bool legacy;       /* the legacy schema (see above) */
    fb_vec tensors;    /* legacy: [TensorMetadata] */
    uint32_t num_entries; /* tensors, then named_data */
} etch_ptd;

typedef struct etch_ptd_entry {
    const char *key;
    const uint8_t *data;
    uint64_t size;
    bool has_layout;
    etch_tensor_desc layout; /* dtype, rank, sizes, dim_order, nbytes */
} etch_ptd_entry;

/* Verifies the header, the flatbuffer, every segment range and every entry (either schema).
 * Entries are numbered 0..num_entries-1. */
etch_status etch_ptd_open(const uint8_t *data, size_t size, etch_ptd *out);
void etch_ptd_entry_at(const etch_ptd *p, uint32_t i, etch_ptd_entry *out);

#endif
