/* Internal (not API): an I/O fault hook for the store's tests. Every step of the store that
 * changes the disk — creating a file or directory, each write, each fsync, each rename — asks
 * the hook first; a non-zero return is taken as that step's errno and the step fails without
 * being done. NULL (the default) disables it. Process-wide; tests only. */
#ifndef ETCH_DEPLOY_STORE_FAULT_H
#define ETCH_DEPLOY_STORE_FAULT_H

/* step: "create", "mkdir", "write", "fsync", "rename"; what: the file or directory. A write
 * step answered ETCH_STORE_FAULT_SHORT_WRITE writes half its bytes, then fails with ENOSPC (a
 * disk that fills up in the middle of a write). */
#define ETCH_STORE_FAULT_SHORT_WRITE (-1)
typedef int (*etch_store_fault_fn)(void *user, const char *step, const char *what);

void etch_store_set_fault_hook(etch_store_fault_fn fn, void *user);

#endif
