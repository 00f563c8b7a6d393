/*
 * etch/sha256.h — SHA-256 (FIPS 180-4), incremental and one-shot, for verifying model files.
 *
 * Basic usage:
 *
 *   etch_sha256 h;
 *   etch_sha256_init(&h);
 *   while ((n = read(fd, buf, sizeof buf)) > 0)
 *       etch_sha256_update(&h, buf, (size_t)n);
 *   uint8_t digest[ETCH_SHA256_SIZE];
 *   etch_sha256_final(&h, digest);             // h must be initialised again before reuse
 *   char hex[ETCH_SHA256_HEX_SIZE];
 *   etch_sha256_hex(digest, hex);              // 64 lowercase hex digits + NUL
 *
 *   etch_sha256_digest(data, size, digest);    // the same in one call
 *
 * No allocation, no I/O; the state is a plain struct the caller owns (any thread, one at a
 * time per struct).
 */
#ifndef ETCH_SHA256_H
#define ETCH_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ETCH_SHA256_SIZE 32     /* digest bytes */
#define ETCH_SHA256_HEX_SIZE 65 /* 64 hex digits + NUL */

typedef struct etch_sha256 {
    uint32_t state[8];
    uint64_t length;      /* message bytes so far */
    uint8_t block[64];    /* pending bytes of the current block */
    size_t used;          /* bytes in block */
} etch_sha256;

void etch_sha256_init(etch_sha256 *h);
/* Add size bytes (data may be NULL when size is 0). */
void etch_sha256_update(etch_sha256 *h, const void *data, size_t size);
/* Write the digest of everything added; h is spent afterwards. */
void etch_sha256_final(etch_sha256 *h, uint8_t digest[ETCH_SHA256_SIZE]);
/* One shot: the digest of data[0..size). */
void etch_sha256_digest(const void *data, size_t size, uint8_t digest[ETCH_SHA256_SIZE]);
/* Lowercase hex of a digest, NUL-terminated. Returns hex. */
char *etch_sha256_hex(const uint8_t digest[ETCH_SHA256_SIZE], char hex[ETCH_SHA256_HEX_SIZE]);
/* Parse 64 hex digits (either case, nothing else) into a digest; false when malformed. */
bool etch_sha256_parse_hex(const char *hex, uint8_t digest[ETCH_SHA256_SIZE]);

#ifdef __cplusplus
}
#endif
#endif
