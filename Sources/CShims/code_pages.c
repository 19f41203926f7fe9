#define _GNU_SOURCE  /* dl_iterate_phdr */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "cshims.h"
#include "memory_fs.h"

/* Whether the object's code pages are a cache of a file on a disk. A file system
 * in memory (tmpfs, and so a plugin's sealed memfd copy) keeps its pages whether
 * or not this process maps them, so unmapping them would take from the RSS and
 * not from what the machine uses. A plugin's copy on a disk (an unnamed file in
 * the state directory, mapped as /proc/self/fd/N, which statfs follows) is
 * released like any other object. */
static int backed_by_disk(const char *name) {
    if (name == NULL || name[0] == '\0') name = "/proc/self/exe";  /* the executable */
    if (name[0] != '/') return 0;  /* the vDSO: no file */
    struct statfs fs;
    if (statfs(name, &fs) != 0) return 0;
    return !cshims_in_memory(&fs);
}

/* /proc/self/pagemap: one 64-bit entry a page; bit 63 present, bit 61 a page of
 * a file (or shared memory) rather than the process's own (anonymous). */
#define PAGEMAP_PRESENT (1ULL << 63)
#define PAGEMAP_FILE (1ULL << 61)

struct release_walk {
    int pagemap;
    uintptr_t page;
    size_t released;
};

/* Unmaps the pages of [start, end) that are still the file's. A present page
 * that is the process's own would be lost (its bytes are no file's): one the
 * loader wrote (text relocations), a debugger's breakpoint, a probe or a live
 * patch, code copied into anonymous memory by a large-page remapper. It is
 * kept. A page written between the read of its entry and the madvise (a
 * debugger attaching at that moment) is not provided for. */
static void release_range(struct release_walk *walk, uintptr_t start, uintptr_t end) {
    uint64_t entries[64];
    uintptr_t run = start;  /* the first page of the run being gathered */
    for (uintptr_t at = start; at < end;) {
        size_t count = (end - at) / walk->page;
        if (count > 64) count = 64;
        off_t offset = (off_t)(at / walk->page * sizeof(uint64_t));
        ssize_t got = pread(walk->pagemap, entries, count * sizeof(uint64_t), offset);
        if (got <= 0) return;  /* unreadable: nothing more is released */
        count = (size_t)got / sizeof(uint64_t);
        for (size_t i = 0; i < count; i++, at += walk->page) {
            int own = (entries[i] & PAGEMAP_PRESENT) && !(entries[i] & PAGEMAP_FILE);
            if (!own) continue;
            if (at > run && madvise((void *)run, at - run, MADV_DONTNEED) == 0) walk->released += at - run;
            run = at + walk->page;
        }
    }
    if (end > run && madvise((void *)run, end - run, MADV_DONTNEED) == 0) walk->released += end - run;
}

static int release_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct release_walk *walk = data;
    if (!backed_by_disk(info->dlpi_name)) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        /* Code only: executable and never writable. */
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || (ph->p_flags & PF_W)) continue;
        /* Whole pages inside what the file holds (p_filesz): a page shared with a
         * neighbour is left, and so is the page the loader zero-filled past the
         * file's bytes (p_memsz beyond p_filesz). */
        uintptr_t start = (info->dlpi_addr + ph->p_vaddr + walk->page - 1) & ~(walk->page - 1);
        uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_filesz) & ~(walk->page - 1);
        if (end > start) release_range(walk, start, end);
    }
    return 0;
}

size_t cshims_release_code_pages(void) {
    struct release_walk walk = { .page = (uintptr_t)sysconf(_SC_PAGESIZE) };
    /* Without the page map, no page can be told to be the file's: none is released. */
    walk.pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (walk.pagemap < 0) return 0;
    /* Under the loader's lock: no object is unmapped while it is walked. */
    dl_iterate_phdr(release_object, &walk);
    close(walk.pagemap);
    return walk.released;
}
