# cython: boundscheck=False, wraparound=False, cdivision=True
"""The heap's meter, compiled: counts what the interpreter's allocators hold, as Redis's
zmalloc counts what it hands out (`_heap_py.py` is the pure build's twin, which hooks nothing).

Two hooks, installed once (`install`), count in O(1): the raw domain's allocator (malloc'd
blocks: every object over pymalloc's 512-byte threshold, and what C code asks of PyMem_Raw),
counted by malloc_usable_size as blocks come and go; and pymalloc's arena allocator, which
records each 1 MiB arena made (what else asks that allocator, a thread's frame stack chunks,
counts as malloc'd). The arenas made before the hooks are found once, at install: the
process's anonymous read-write mappings are read through /proc/self/mem (an unmapped page is
an error there, never a fault) at every 16 KiB boundary for a pool header that holds
together (a size class, its block bounds, its offsets), and each arena is its pools of one
arena index. `small_used` walks every recorded arena's pool headers and sums each pool's
blocks in use times its size class: pymalloc's small objects, exact, in time proportional to
the arenas (64 pool headers per MiB). `arena_bytes + raw_live` bounds what was counted from
above without a walk (an arena's free blocks count whole).

The pool header's layout (its block count first, then at byte 36 its size class, at 40 and 44
its next and last fresh block's offsets; 16 KiB pools of 16-byte size classes in 1 MiB
arenas) is CPython's pymalloc on 64-bit builds of 3.10 to 3.13; the facade installs nothing
under PYTHONMALLOC or dev mode (debug hooks put their own header before a block). Must not
touch: Python objects (the raw hooks run without the GIL).
"""

cdef extern from *:
    """
    #include <Python.h>
    #include <fcntl.h>
    #include <malloc.h>
    #include <stdint.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <unistd.h>

    #define SK_POOL_SIZE ((uintptr_t)16384)
    #define SK_POOL_OVERHEAD 48
    #define SK_ARENA_SIZE ((size_t)1 << 20)
    #define SK_POOLS_MAX 64

    typedef struct { uint32_t count; uint32_t pad; void *freeblock, *next, *prev;
                     uint32_t arenaindex, szidx, nextoffset, maxnextoffset; } sk_pool;

    typedef struct { uintptr_t base; uintptr_t first; uint32_t npools; } sk_arena;

    static PyMemAllocatorEx sk_raw_orig;
    static PyObjectArenaAllocator sk_arena_orig;
    static long long sk_raw_live = 0;
    static long long sk_arena_bytes = 0;
    static sk_arena *sk_arenas = NULL;
    static size_t sk_n_arenas = 0, sk_cap_arenas = 0;
    static int sk_installed = 0;

    static void sk_count(long long delta) {
        __atomic_add_fetch(&sk_raw_live, delta, __ATOMIC_RELAXED);
    }
    static void *sk_raw_malloc(void *ctx, size_t n) {
        void *p = sk_raw_orig.malloc(sk_raw_orig.ctx, n);
        if (p != NULL) sk_count((long long)malloc_usable_size(p));
        return p;
    }
    static void *sk_raw_calloc(void *ctx, size_t nelem, size_t elsize) {
        void *p = sk_raw_orig.calloc(sk_raw_orig.ctx, nelem, elsize);
        if (p != NULL) sk_count((long long)malloc_usable_size(p));
        return p;
    }
    static void *sk_raw_realloc(void *ctx, void *p, size_t n) {
        long long before = p != NULL ? (long long)malloc_usable_size(p) : 0;
        void *q = sk_raw_orig.realloc(sk_raw_orig.ctx, p, n);
        if (q != NULL) sk_count((long long)malloc_usable_size(q) - before);
        return q;
    }
    static void sk_raw_free(void *ctx, void *p) {
        if (p != NULL) sk_count(-(long long)malloc_usable_size(p));
        sk_raw_orig.free(sk_raw_orig.ctx, p);
    }

    static int sk_record(uintptr_t base, uintptr_t first, uint32_t npools) {
        if (sk_n_arenas == sk_cap_arenas) {
            size_t cap = sk_cap_arenas ? sk_cap_arenas * 2 : 256;
            sk_arena *grown = (sk_arena *)realloc(sk_arenas, cap * sizeof(sk_arena));
            if (grown == NULL) return 0;  /* left unrecorded: the walk undercounts it */
            sk_arenas = grown;
            sk_cap_arenas = cap;
        }
        sk_arenas[sk_n_arenas].base = base;
        sk_arenas[sk_n_arenas].first = first;
        sk_arenas[sk_n_arenas].npools = npools;
        sk_n_arenas++;
        sk_arena_bytes += (long long)SK_ARENA_SIZE;
        return 1;
    }

    static void *sk_arena_alloc(void *ctx, size_t size) {
        void *p = sk_arena_orig.alloc(sk_arena_orig.ctx, size);
        if (p == NULL) return NULL;
        if (size != SK_ARENA_SIZE) {  /* not pymalloc's: a thread's frame stack chunk */
            sk_count((long long)size);
            return p;
        }
        uintptr_t base = (uintptr_t)p;
        uintptr_t first = (base + SK_POOL_SIZE - 1) & ~(SK_POOL_SIZE - 1);
        sk_record(base, first, (uint32_t)((base + SK_ARENA_SIZE - first) / SK_POOL_SIZE));
        return p;
    }
    static void sk_arena_free(void *ctx, void *p, size_t size) {
        size_t i;
        uintptr_t base = (uintptr_t)p;
        if (size != SK_ARENA_SIZE) {
            sk_count(-(long long)size);
            sk_arena_orig.free(sk_arena_orig.ctx, p, size);
            return;
        }
        for (i = 0; i < sk_n_arenas; i++) {
            sk_arena *a = &sk_arenas[i];
            /* (a found arena's base is known to within the page before its first pool) */
            if (a->base == base || (a->base == 0 && a->first >= base
                                    && a->first - base < SK_POOL_SIZE)) {
                sk_arenas[i] = sk_arenas[--sk_n_arenas];
                sk_arena_bytes -= (long long)SK_ARENA_SIZE;
                break;
            }
        }
        sk_arena_orig.free(sk_arena_orig.ctx, p, size);
    }

    /* A pool header that holds together: a size class, its offsets within the pool. */
    static int sk_pool_valid(const sk_pool *h) {
        uint32_t size;
        if (h->szidx >= 32) return 0;
        size = (h->szidx + 1) << 4;
        if (h->maxnextoffset != SK_POOL_SIZE - size) return 0;
        if (h->nextoffset < SK_POOL_OVERHEAD + size || h->nextoffset > SK_POOL_SIZE + size
            || (h->nextoffset - SK_POOL_OVERHEAD) % size != 0) return 0;
        if (h->count > (SK_POOL_SIZE - SK_POOL_OVERHEAD) / size) return 0;
        return 1;
    }

    /* The arenas made before the hooks, in the anonymous read-write mappings of
       /proc/self/maps: each arena index's lowest pool is its first. */
    static long sk_discover(void) {
        FILE *maps = fopen("/proc/self/maps", "r");
        int mem = open("/proc/self/mem", O_RDONLY);
        char line[512];
        uintptr_t *firsts = NULL;
        uint32_t cap = 0, i;
        long found = 0;
        if (maps == NULL || mem < 0) {
            if (maps != NULL) fclose(maps);
            if (mem >= 0) close(mem);
            return -1;
        }
        while (fgets(line, sizeof line, maps) != NULL) {
            unsigned long start, end, offset, inode;
            char perms[8], dev[16], path[256];
            uintptr_t pool;
            path[0] = 0;
            if (sscanf(line, "%lx-%lx %7s %lx %15s %lu %255s", &start, &end, perms, &offset,
                       dev, &inode, path) < 6) continue;
            if (strncmp(perms, "rw-p", 4) != 0 || inode != 0 || (path[0] && path[0] != '['))
                continue;
            if (path[0] == '[' && strcmp(path, "[heap]") != 0) continue;  /* stacks, vdso */
            for (pool = (start + SK_POOL_SIZE - 1) & ~(SK_POOL_SIZE - 1);
                 pool + SK_POOL_SIZE <= end; pool += SK_POOL_SIZE) {
                sk_pool h;
                if (pread(mem, &h, sizeof h, (off_t)pool) != (ssize_t)sizeof h) continue;
                if (!sk_pool_valid(&h) || h.arenaindex > (1u << 24)) continue;
                if (h.arenaindex >= cap) {
                    uint32_t grown = cap ? cap : 64;
                    uintptr_t *more;
                    while (grown <= h.arenaindex) grown *= 2;
                    more = (uintptr_t *)realloc(firsts, grown * sizeof(uintptr_t));
                    if (more == NULL) continue;
                    memset(more + cap, 0, (grown - cap) * sizeof(uintptr_t));
                    firsts = more;
                    cap = grown;
                }
                if (firsts[h.arenaindex] == 0 || pool < firsts[h.arenaindex])
                    firsts[h.arenaindex] = pool;
            }
        }
        fclose(maps);
        for (i = 0; i < cap; i++) {
            uintptr_t first = firsts[i];
            uint32_t npools = SK_POOLS_MAX - 1;
            sk_pool last;
            if (first == 0) continue;
            /* an arena whose base is pool-aligned has a 64th pool: its header says so */
            if (pread(mem, &last, sizeof last, (off_t)(first + npools * SK_POOL_SIZE))
                    == (ssize_t)sizeof last && sk_pool_valid(&last) && last.arenaindex == i)
                npools = SK_POOLS_MAX;
            if (sk_record(0, first, npools)) found++;
        }
        free(firsts);
        close(mem);
        return found;
    }

    static int sk_install(void) {
        PyMemAllocatorEx raw;
        PyObjectArenaAllocator arena;
        if (sk_installed) return 1;
        PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &sk_raw_orig);
        PyObject_GetArenaAllocator(&sk_arena_orig);
        raw.ctx = NULL;
        raw.malloc = sk_raw_malloc;
        raw.calloc = sk_raw_calloc;
        raw.realloc = sk_raw_realloc;
        raw.free = sk_raw_free;
        arena.ctx = NULL;
        arena.alloc = sk_arena_alloc;
        arena.free = sk_arena_free;
        /* Found, then hooked, with the GIL held: no arena comes or goes in between. */
        sk_discover();
        PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &raw);
        PyObject_SetArenaAllocator(&arena);
        sk_installed = 1;
        return 1;
    }

    /* pymalloc's bytes in use in the recorded arenas (blocks in *blocks). */
    static long long sk_small_used(long long *blocks) {
        long long used = 0, count_all = 0;
        size_t i;
        uint32_t k;
        for (i = 0; i < sk_n_arenas; i++) {
            uintptr_t pool = sk_arenas[i].first;
            for (k = 0; k < sk_arenas[i].npools; k++, pool += SK_POOL_SIZE) {
                const sk_pool *h = (const sk_pool *)pool;
                if (h->count == 0 || h->szidx >= 32) continue;
                used += (long long)h->count * (long long)((h->szidx + 1) << 4);
                count_all += h->count;
            }
        }
        *blocks = count_all;
        return used;
    }
    """
    int sk_install()
    long long sk_small_used(long long *blocks)
    long long sk_raw_live
    long long sk_arena_bytes
    int sk_installed
    size_t sk_n_arenas


def install() -> bool:
    """Install the counting hooks (once; True when they count)."""
    return bool(sk_install())


def installed() -> bool:
    return bool(sk_installed)


def raw_live() -> int:
    """Bytes of malloc'd blocks the raw domain handed out since install, less those freed
    (negative when blocks from before install were freed)."""
    return sk_raw_live


def arena_bytes() -> int:
    """Bytes in the recorded pymalloc arenas (made since install, or found at install)."""
    return sk_arena_bytes


def arena_count() -> int:
    return sk_n_arenas


def counted_bound() -> int:
    """arena_bytes() + raw_live() in one call (maxmemory's check before every command)."""
    return sk_arena_bytes + sk_raw_live


def small_used() -> tuple[int, int]:
    """(bytes, blocks) pymalloc has handed out of the recorded arenas: a walk of their pool
    headers."""
    cdef long long blocks = 0
    cdef long long used = sk_small_used(&blocks)
    return used, blocks
