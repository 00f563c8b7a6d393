/* Reading a whole test input file (header only). */
#ifndef ETCH_TEST_FILE_H
#define ETCH_TEST_FILE_H

#include <stdio.h>
#include <stdlib.h>

/* The file's bytes at buf + offset (offset lets a caller misalign the data on purpose),
 * followed by a NUL; *size = the file's length. Returns buf (free() it), or NULL when the
 * file cannot be opened or read. */
static inline void *etch_test_read_file(const char *path, size_t offset, size_t *size) {
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    char *buf = (char *)malloc(offset + (size_t)n + 1);
    if (buf && fread(buf + offset, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[offset + (size_t)n] = 0;
        *size = (size_t)n;
    }
    return buf;
}

#endif
