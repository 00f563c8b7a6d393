/* Helpers of the store tests: temporary directories, whole-file I/O, manifest surgery. */
#ifndef ETCH_STORE_TEST_UTIL_H
#define ETCH_STORE_TEST_UTIL_H

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etch/sha256.h"
#include "test_file.h"

static int rm_one_(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* rm -rf, not following links. */
static inline void st_rm_rf(const char *path) {
    nftw(path, rm_one_, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory under $TMPDIR (or /tmp): its path in buf. */
static inline const char *st_mkdtemp(char *buf, size_t cap, const char *tag) {
    const char *t = getenv("TMPDIR");
    snprintf(buf, cap, "%s/etch-%s-XXXXXX", t && t[0] ? t : "/tmp", tag);
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        exit(2);
    }
    return buf;
}

static inline unsigned char *st_read(const char *path, size_t *size) {
    return (unsigned char *)etch_test_read_file(path, 0, size);
}

static inline int st_write(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = size ? fwrite(data, 1, size, f) : 0;
    fclose(f);
    return w == size ? 0 : -1;
}

static inline void st_hex_of(const void *data, size_t n, char hex[ETCH_SHA256_HEX_SIZE]) {
    uint8_t d[ETCH_SHA256_SIZE];
    etch_sha256_digest(data, n, d);
    etch_sha256_hex(d, hex);
}

static inline bool st_exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* Entries of a directory whose names start with prefix. */
static inline int st_count_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            n++;
    closedir(d);
    return n;
}

/* Replace the line starting with `key ` (the first one; or append when absent and `value`
 * is given; delete when value is NULL) in a manifest, then, when `reseal`, recompute its
 * end line: a manifest that lies consistently. */
static inline int st_edit_manifest(const char *path, const char *key, const char *value,
                                   bool reseal) {
    size_t n;
    unsigned char *t = st_read(path, &n);
    if (!t)
        return -1;
    char *out = malloc(n + 1024);
    size_t o = 0;
    bool done = false;
    const char *p = (const char *)t, *end = (const char *)t + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        bool is_end = !strncmp(p, "end ", 4);
        if (!done && !strncmp(p, key, strlen(key)) && p[strlen(key)] == ' ') {
            done = true;
            if (value)
                o += (size_t)sprintf(out + o, "%s %s\n", key, value);
        } else if (is_end && reseal) {
            if (!done && value) {
                o += (size_t)sprintf(out + o, "%s %s\n", key, value);
                done = true;
            }
            char hex[ETCH_SHA256_HEX_SIZE];
            st_hex_of(out, o, hex);
            o += (size_t)sprintf(out + o, "end %s\n", hex);
        } else {
            memcpy(out + o, p, len);
            o += len;
        }
        p += len;
    }
    int r = st_write(path, out, o);
    free(out);
    free(t);
    return r;
}

/* Flip one byte of a file at offset. */
static inline int st_flip(const char *path, long off) {
    FILE *f = fopen(path, "r+b");
    if (!f)
        return -1;
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    return 0;
}

#endif
