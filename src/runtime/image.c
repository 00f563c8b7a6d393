#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#if !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* madvise's MADV_DONTNEED (glibc's posix_madvise ignores DONTNEED) */
#endif
#include <string.h>
#if !defined(ETCH_FREESTANDING)
#include <errno.h>
#include <stdio.h>
#endif

#if !defined(ETCH_FREESTANDING) && (defined(__unix__) || defined(__APPLE__))
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define ETCH_HAVE_MMAP 1
#endif

#include "etch/platform.h"
#include "runtime/error.h"
#include "runtime/image.h"

/* The default allocator is the platform's (etch/platform.h): aligned_alloc on a host, the
 * board's start-up memory (or none) on a microcontroller. */
static void *libc_alloc(void *self, size_t size, size_t align) {
    (void)self;
    return etch_platform_alloc(size, align);
}

static void libc_free(void *self, void *ptr) {
    (void)self;
    etch_platform_free(ptr);
}

static const etch_allocator libc_allocator = {libc_alloc, libc_free, NULL};

const etch_allocator *etch_allocator_libc(void) { return &libc_allocator; }

#if !defined(ETCH_FREESTANDING)
static etch_status read_whole(const char *path, const etch_allocator *a, etch_image *img) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return etch_err(ETCH_ERR_ACCESS_FAILED, "cannot open '%s': %s", path, strerror(errno));
    long end = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        end = ftell(f);
    if (end < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return etch_err(ETCH_ERR_ACCESS_FAILED, "cannot determine the size of '%s'", path);
    }
    size_t size = (size_t)end;
    uint8_t *buf = a->alloc(a->self, size ? size : 16, 16);
    if (!buf) {
        fclose(f);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "cannot allocate %zu bytes for '%s'",
                        size, path);
    }
    if (size && fread(buf, 1, size, f) != size) {
        fclose(f);
        a->free(a->self, buf);
        return etch_err(ETCH_ERR_ACCESS_FAILED, "short read of '%s'", path);
    }
    fclose(f);
    img->data = buf;
    img->size = size;
    img->owned = buf;
    return ETCH_OK;
}

#endif

etch_status etch_image_open_file(const char *path, etch_load_mode mode, const etch_allocator *a,
                                 etch_image *out) {
    etch_image img;
    memset(&img, 0, sizeof img);
    img.alloc = a ? a : &libc_allocator;
    if (!path)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "no file path given");
    if (mode != ETCH_LOAD_MMAP && mode != ETCH_LOAD_READ)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "unknown load mode %d", (int)mode);
#if defined(ETCH_FREESTANDING)
    (void)out;
    return etch_err(ETCH_ERR_NOT_SUPPORTED,
                    "cannot open '%s': a freestanding build has no file system (open the "
                    "program from memory: etch_program_open_buffer)", path);
#else
#if ETCH_HAVE_MMAP
    if (mode == ETCH_LOAD_MMAP) {
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            return etch_err(ETCH_ERR_ACCESS_FAILED, "cannot open '%s': %s", path,
                            strerror(errno));
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            return etch_err(ETCH_ERR_ACCESS_FAILED, "'%s' is not a regular file", path);
        }
        size_t size = (size_t)st.st_size;
        if (size == 0) {
            close(fd);
            img.data = (const uint8_t *)"";
            *out = img;
            return ETCH_OK;
        }
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        int map_errno = errno;
        close(fd);
        /* ENOMEM (no address space, or the mapping limit): a memory failure that a caller may
         * retry, not a file that cannot be read (tests/faults). */
        if (m == MAP_FAILED)
            return etch_err(map_errno == ENOMEM ? ETCH_ERR_MEMORY_ALLOCATION_FAILED
                                                : ETCH_ERR_ACCESS_FAILED,
                            "cannot map '%s': %s", path, strerror(map_errno));
        img.data = m;
        img.size = size;
        img.map_base = m;
        img.map_len = size;
        *out = img;
        return ETCH_OK;
    }
#endif
    etch_status st = read_whole(path, img.alloc, &img);
    if (st == ETCH_OK)
        *out = img;
    return st;
#endif
}

size_t etch_image_release(const etch_image *img, const void *p, size_t n) {
#if ETCH_HAVE_MMAP && defined(MADV_DONTNEED)
    const uintptr_t base = (uintptr_t)img->map_base, a = (uintptr_t)p;
    if (!img->map_base || !p || a < base || a - base > img->map_len ||
        n > img->map_len - (a - base))
        return 0;
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0)
        return 0;
    const uintptr_t page = (uintptr_t)pg, lo = (a + page - 1) / page * page;
    const uintptr_t hi = (a + n) / page * page;
    if (hi <= lo || madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0)
        return 0;
    return hi - lo;
#else
    (void)img, (void)p, (void)n;
    return 0;
#endif
}

etch_status etch_image_from_buffer(const void *data, size_t size, const etch_allocator *a,
                                   etch_image *out) {
    etch_image img;
    memset(&img, 0, sizeof img);
    img.alloc = a ? a : &libc_allocator;
    if (!data && size)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "NULL buffer of %zu bytes", size);
#if defined(ETCH_FREESTANDING)
    /* A program in flash is borrowed where it lies: copying it would take RAM the firmware
     * never planned for. etch embed (or ETCH_PTE_ALIGN in its header) aligns the array. */
    if (((uintptr_t)data & 15) && size)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "program image at 0x%lx is not 16-byte aligned (a freestanding build "
                        "borrows it in place: align the array to 16 bytes)",
                        (unsigned long)(uintptr_t)data);
#endif
    if (((uintptr_t)data & 15) && size) {
        uint8_t *copy = img.alloc->alloc(img.alloc->self, size, 16);
        if (!copy)
            return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                            "cannot allocate %zu bytes to align the buffer", size);
        memcpy(copy, data, size);
        img.owned = copy;
        img.data = copy;
    } else {
        img.data = size ? data : (const uint8_t *)"";
    }
    img.size = size;
    *out = img;
    return ETCH_OK;
}

void etch_image_close(etch_image *img) {
#if ETCH_HAVE_MMAP
    if (img->map_base)
        munmap(img->map_base, img->map_len);
#endif
    if (img->owned)
        img->alloc->free(img->alloc->self, img->owned);
    memset(img, 0, sizeof *img);
}
