#define _GNU_SOURCE  /* dl_iterate_phdr */
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "cshims.h"

/* Filesystems whose pages are memory, not a cache of a disk: their pages stay
 * where they are whether or not this process maps them (a plugin's sealed memfd
 * copy is on tmpfs), so unmapping them would take from the RSS and not from
 * what the machine uses. */
#define TMPFS_MAGIC_VALUE 0x01021994
#define RAMFS_MAGIC_VALUE 0x858458f6

/* Whether the object's code pages are a cache of a file on a disk. */
static int backed_by_disk(const char *name) {
    if (name == NULL || name[0] == '\0') name = "/proc/self/exe";  /* the executable */
    if (name[0] != '/') return 0;  /* the vDSO: no file */
    struct statfs fs;
    if (statfs(name, &fs) != 0) return 0;
    return fs.f_type != TMPFS_MAGIC_VALUE && fs.f_type != RAMFS_MAGIC_VALUE;
}

/* Whether the loader wrote into the object's code (text relocations): those
 * pages are the process's own copies, which unmapping would undo. */
static int has_text_relocations(const struct dl_phdr_info *info) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_DYNAMIC) continue;
        for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr); d->d_tag != DT_NULL; d++) {
            if (d->d_tag == DT_TEXTREL) return 1;
            if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)) return 1;
        }
    }
    return 0;
}

static int release_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    size_t *released = data;
    if (!backed_by_disk(info->dlpi_name) || has_text_relocations(info)) return 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        /* Code only: executable and never writable, so every page is the file's. */
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || (ph->p_flags & PF_W)) continue;
        /* Whole pages inside the segment: a page it shares with a neighbour is left. */
        uintptr_t start = (info->dlpi_addr + ph->p_vaddr + page - 1) & ~(page - 1);
        uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(page - 1);
        if (end > start && madvise((void *)start, end - start, MADV_DONTNEED) == 0) *released += end - start;
    }
    return 0;
}

size_t cshims_release_code_pages(void) {
    size_t released = 0;
    /* Under the loader's lock: no object is unmapped while it is walked. */
    dl_iterate_phdr(release_object, &released);
    return released;
}
