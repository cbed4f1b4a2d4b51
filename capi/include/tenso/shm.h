/**
 * @file tenso/shm.h
 * @brief tensors in POSIX shared memory: single-packet segments (tenso_shm_*) and a
 * tensor cache shared by any number of processes on one host (tenso_cache_*).
 *
 * Included by tenso/tenso.h; may also be included on its own.
 *
 * Names follow shm_open(3) and Python's multiprocessing.shared_memory: "weights" and
 * "/weights" name the same segment, /dev/shm/weights on Linux. A name is at most 255 bytes,
 * with no '/' after the leading one, and is neither "." nor "..".
 *
 * Trust. Segments and pools are created 0600, and opening one by name refuses an object owned
 * by another uid than the caller's effective one (TENSO_E_IO) unless TENSO_SHM_ANY_OWNER is
 * passed: whoever can write the object can change every byte a reader sees. Share a pool only
 * between processes that trust each other (same user, or users who would trust each other's
 * code): see docs/threat-model.md.
 *
 * Truncation. Whoever can write a segment or pool can also ftruncate it, and touching a
 * mapping's pages past the object's new end raises SIGBUS. libtenso therefore maps segments and
 * pools under a SIGBUS handler of its own, installed at the first such mapping in a process: a
 * fault inside one of them replaces the lost pages, in this process only, with private zero
 * pages and marks the handle truncated; every other fault is passed to the handler that was
 * there before. A view handed out earlier then reads zeros where the lost pages were (as if a
 * writer had zeroed those bytes, which any writer may do anyway), freeing it is safe, and the
 * call during which the truncation happened and every later call on the handle answer
 * TENSO_E_TRUNCATED. Once a fault has marked the handle it stays marked, also after the object
 * grows back; a truncation undone before anything touched the lost pages goes unnoticed. A call
 * notices a truncation by reading the mapping's last byte, without a system call. Pages the
 * kernel cannot provide (the tmpfs behind /dev/shm is full) fault the same way: creating a
 * segment or pool that /dev/shm has no room for fails with TENSO_E_TRUNCATED and leaves no
 * object behind.
 *
 * Limits; in these cases a truncation can still end the process with SIGBUS, or go unnoticed:
 * - A shrink that leaves the new end inside the mapping's last page raises no fault (whatever
 *   the object's size, a page-multiple one included): the bytes past the new end read as zeros
 *   and calls go on. A pool of 1 MiB or more keeps no packet in its last page (whole or
 *   partial), so such a shrink cannot reach its data; in a smaller pool, and in a segment, the
 *   packet's last bytes may read as zeros unnoticed.
 * - Memory of a mapping handed to a system call (write(2) from a view's buffer, a socket send)
 *   is read by the kernel, which does not fault: the call fails with EFAULT where the pages
 *   are gone. A pool's mutex lives in the pool: if a truncation takes its page between glibc's
 *   user-space read of the lock word and its futex wait, glibc can abort the process.
 * - A SIGBUS handler installed later that does not pass SIGBUS on to the one it replaced, with
 *   its siginfo, takes this protection away from every mapping, and Python's
 *   faulthandler.enable() is such a handler (it re-raises the signal, losing the fault
 *   address); faulthandler.disable() then restores the default, not libtenso's handler.
 *   Mappings made while another handler is installed are not guarded: their calls check the
 *   object's size with lseek instead. Enable faulthandler before the first segment or pool, or
 *   not at all, in a process that maps objects others may truncate.
 * - Past 1024 mappings in a process, each call on the others asks the kernel for the object's
 *   size (lseek) instead, and a truncation after that check raises SIGBUS.
 * The handler's code must stay mapped: libtenso.so is never unloaded once loaded (linked
 * -z nodelete). Where the engine is linked statically instead (the Rust crate's default
 * `bundled` feature) it is part of that program or library; a shared library built that way
 * must not be unloaded after its first segment or pool.
 */
#ifndef TENSO_SHM_H
#define TENSO_SHM_H

#include "tenso/tenso.h"

TENSO_BEGIN_DECL

/* ============================================================================================
 * Segments: one packet in one named shared-memory object
 *
 * The packet starts at byte 0 of the segment; the segment may be larger than the packet. This
 * is the layout of the upstream Python `TensoShm`, so segments are exchanged with it both
 * ways. Unlike upstream, reads frame the packet by its exact length (tenso_packet_length), so
 * compressed packets and packets followed by stale bytes read back correctly.
 *
 * A tenso_shm is a mapping of the segment in this process. Views returned by tenso_shm_get()
 * point into the mapping and keep it mapped after tenso_shm_close(); they see whatever a later
 * put writes there (a segment has no pinning: use the cache for that). The mapping has the size
 * the segment had when it was opened: a segment is never resized in place (see "Truncation"
 * above for what an ftruncate by another program does).
 * ========================================================================================== */

/** A mapped shared-memory segment holding one packet. */
typedef struct tenso_shm tenso_shm;

/** tenso_shm_create flags: if a segment of that name exists (a leftover of a crashed run),
 *  unlink it and create a fresh one instead of failing with TENSO_E_EXISTS. */
#define TENSO_SHM_REPLACE 0x1u

/** tenso_shm_open_flags flags: map the segment read-write (needed by tenso_shm_put).
 *  @since 1.2 */
#define TENSO_SHM_WRITABLE 0x1u

/** tenso_shm_open_flags flags and tenso_cache_options.flags (open): also open an object owned by
 *  another uid than the caller's effective uid, which is refused by default (TENSO_E_IO). Only
 *  for a peer you trust with your process's reads (and, for a pool, with its mutex).
 *  @since 1.2 */
#define TENSO_SHM_ANY_OWNER 0x2u

/**
 * Creates a segment of `size` bytes (zero-filled) and maps it read-write.
 * @param out    receives the segment (free with tenso_shm_close()).
 * @param name   the POSIX shared-memory name (see above).
 * @param size   bytes, at least 1.
 * @param flags  0 or TENSO_SHM_REPLACE.
 * @return TENSO_E_EXISTS when the name is taken (without TENSO_SHM_REPLACE);
 *         TENSO_E_INVALID_ARGUMENT for a bad name or size 0; TENSO_E_IO when the system
 *         refuses (errno's text in the message). @since 1.1
 */
TENSO_API tenso_status tenso_shm_create(tenso_shm **out, const char *name, uint64_t size, uint32_t flags);

/**
 * Creates a segment sized exactly for `v` under `opts` (compression is done first, so the size
 * is the compressed packet's) and encodes `v` into it: one copy of each body, straight into
 * shared memory. On failure no segment is left under `name`.
 * @param out          receives the segment (free with tenso_shm_close()).
 * @param written_out  may be NULL; receives the packet length.
 * @param name         the POSIX shared-memory name.
 * @param v            the value to encode.
 * @param opts         NULL for defaults.
 * @param flags        0 or TENSO_SHM_REPLACE.
 * @since 1.1
 */
TENSO_API tenso_status tenso_shm_create_for(tenso_shm **out, uint64_t *written_out, const char *name,
                                            const tenso_value *v, const tenso_encode_options *opts, uint32_t flags);

/**
 * Opens an existing segment owned by the caller's effective uid.
 * @param out       receives the segment (free with tenso_shm_close()).
 * @param name      the POSIX shared-memory name.
 * @param writable  non-zero maps it read-write (needed by tenso_shm_put).
 * @return TENSO_E_NOT_FOUND when there is no segment of that name; TENSO_E_IO when it is
 *         owned by another uid (see tenso_shm_open_flags) or the system refuses;
 *         TENSO_E_INVALID_ARGUMENT for a bad name. @since 1.1
 */
TENSO_API tenso_status tenso_shm_open(tenso_shm **out, const char *name, int writable);

/**
 * Opens an existing segment, as tenso_shm_open, with flags.
 * @param out    receives the segment (free with tenso_shm_close()).
 * @param name   the POSIX shared-memory name.
 * @param flags  0 (read-only), or TENSO_SHM_WRITABLE and/or TENSO_SHM_ANY_OWNER.
 * @return as tenso_shm_open; TENSO_E_INVALID_ARGUMENT also for unknown flags. @since 1.2
 */
TENSO_API tenso_status tenso_shm_open_flags(tenso_shm **out, const char *name, uint32_t flags);

/**
 * Encodes `v` at the start of the segment.
 * @param written_out  may be NULL; receives the packet length, or with
 *                     TENSO_E_BUFFER_TOO_SMALL the size needed.
 * @param shm          a segment opened writable.
 * @param v            the value to encode.
 * @param opts         NULL for defaults.
 * @return TENSO_E_BUFFER_TOO_SMALL when the packet does not fit (the segment is unchanged);
 *         TENSO_E_INVALID_ARGUMENT when the segment was opened read-only;
 *         TENSO_E_TRUNCATED when the segment was truncated under the mapping. @since 1.1
 */
TENSO_API tenso_status tenso_shm_put(uint64_t *written_out, tenso_shm *shm, const tenso_value *v,
                                     const tenso_encode_options *opts);

/**
 * Decodes the packet at the start of the segment: a zero-copy view into the mapping (except
 * for LZ4 bodies, decompressed into memory the view owns). The view keeps the mapping alive.
 * @return the tenso_loads statuses; TENSO_E_TRUNCATED when the segment holds no whole packet
 *         or was truncated under the mapping. @since 1.1
 */
TENSO_API tenso_status tenso_shm_get(tenso_view **out, const tenso_shm *shm, const tenso_decode_options *opts);

/** The mapping's first byte (writable when created or opened writable); NULL for NULL.
 *  @since 1.1 */
TENSO_API void *tenso_shm_data(const tenso_shm *shm);
/** The segment's size in bytes. @since 1.1 */
TENSO_API uint64_t tenso_shm_size(const tenso_shm *shm);
/** The name as given to create/open, NUL-terminated, owned by the handle. @since 1.1 */
TENSO_API const char *tenso_shm_name(const tenso_shm *shm);

/** Releases the handle; the mapping goes when the last view into it is freed. The segment
 *  itself stays until unlinked. NULL is accepted. @since 1.1 */
TENSO_API void tenso_shm_close(tenso_shm *shm);

/** Removes the name (mappings stay valid until closed). @return TENSO_E_NOT_FOUND when there
 *  is no such segment. @since 1.1 */
TENSO_API tenso_status tenso_shm_unlink(const char *name);

/* ============================================================================================
 * The tensor cache: one pool, any number of processes
 *
 * A cache is one shared-memory object holding a header, a table of entries, a hash index,
 * and a data region of packets at 64-byte aligned offsets; its layout is documented in
 * docs/cache-layout.md. Any process that opens the same name sees the same entries.
 *
 * Consistency. Every operation takes one process-shared robust mutex (with a timeout). A
 * process that dies while holding it does not wedge the others: the next one to lock it
 * rebuilds every derived structure (index, LRU list, free space, pin counts) from the entry
 * table, drops the entry that was being written, and carries on (counted in
 * tenso_cache_stats.recoveries).
 *
 * Trust model. Every attached process can write every byte of the pool. Tables and packets
 * are checked before they are followed, so a corrupt pool gives TENSO_E_CORRUPT (or a decode
 * status), not a wild read; but the mutex is a glibc pthread_mutex_t in that same memory, and
 * garbage written into it can make glibc abort the process inside pthread_mutex_trylock or
 * pthread_mutex_clocklock (or hang it until the lock timeout). That is inherent to a
 * process-shared mutex and cannot be checked: attach only processes you would trust not to
 * crash you. Pools are created 0600 and tenso_cache_open refuses another uid's pool unless
 * tenso_cache_options.flags has TENSO_SHM_ANY_OWNER. A truncated pool answers every operation
 * with TENSO_E_TRUNCATED (see "Truncation" above).
 *
 * Zero-copy reads are pinned. tenso_cache_get() returns a view into the pool and pins the
 * entry until the view is freed: a pinned entry is never evicted, expired, overwritten or
 * reused in place. Deleting or replacing a pinned key hides it at once but keeps its bytes
 * until the last pin is released. Pins are recorded per attached handle, so the pins of a
 * process that died are reclaimed (processes sharing a pool must share a PID namespace).
 * Freeing a view may keep its pin as the handle's one spare, which the next get of the same
 * key takes back without locking the pool (a repeated hit costs no lock at all); any put,
 * eviction, delete, info or stats that finds a spare in its way releases it first, so the
 * pins these report count views. Libraries older than this (1.5.0 and before) attached to
 * the same pool see a spare as a pin until the handle's next get of another key or detach.
 *
 * Space. A put that does not fit first drops expired entries, then evicts unpinned entries
 * from the least recently used end, and answers TENSO_E_FULL when that is not enough.
 *
 * Keys are 1 to 128 bytes of UTF-8. Times are CLOCK_MONOTONIC (shared by all processes).
 * A handle may be used from several threads at once.
 * ========================================================================================== */

/** A handle attached to a cache pool. */
typedef struct tenso_cache tenso_cache;

/** The longest key, in bytes. */
#define TENSO_CACHE_MAX_KEY_BYTES 128

/** Options for creating or opening a cache. Zero means "default" in every field. */
typedef struct tenso_cache_options {
    uint32_t version;         /**< TENSO_CACHE_OPTIONS_VERSION */
    uint32_t flags;           /**< TENSO_SHM_REPLACE on create; TENSO_SHM_ANY_OWNER on open */
    uint64_t size;            /**< create: pool bytes, header and tables included; 0 = 256 MiB */
    uint32_t max_entries;     /**< create: entry slots; 0 = derived from size (1 per 16 KiB,
                                 at most 1 << 20; below 1 MiB 1 per 4 KiB, at most 64) */
    uint32_t max_clients;     /**< create: handles attached at once; 0 = 1 per 4 KiB of pool,
                                 at least 2, at most 256 (256 from 1 MiB up) */
    uint32_t max_pins;        /**< create: distinct (handle, entry) pins at once; 0 =
                                 max_entries x max_clients, at most 16384 */
    uint32_t lock_timeout_ms; /**< this handle: wait for the lock at most this; 0 = 10000 */
} tenso_cache_options;

#define TENSO_CACHE_OPTIONS_VERSION 1 /**< the tenso_cache_options version these headers declare */
/** A tenso_cache_options with every default. */
#define TENSO_CACHE_OPTIONS_INIT \
    { TENSO_CACHE_OPTIONS_VERSION, 0, 0, 0, 0, 0, 0 }

/** Fills *opts with defaults for struct version `version`. @since 1.1 */
TENSO_API tenso_status tenso_cache_options_init(tenso_cache_options *opts, uint32_t version);

/**
 * Creates a pool named `name` and attaches to it.
 * Any size from 4800 bytes up works with derived counts (since 1.4; 1.1 to 1.3 refused pools
 * under about 600 KiB). A tiny pool holds little: 4800 bytes give 1 entry of up to 128 bytes
 * (a 16-float32 tensor) and 2 clients; 16 KiB give 4 entries, 4 clients and about 10 KiB of packets (the
 * header is 4 KiB). tenso_cache_stats_get tells max_entries and data_bytes.
 * @return TENSO_E_EXISTS when the name is taken (without TENSO_SHM_REPLACE);
 *         TENSO_E_INVALID_ARGUMENT when the size cannot hold the tables and one packet (the
 *         message names the smallest size).
 * @since 1.1
 */
TENSO_API tenso_status tenso_cache_create(tenso_cache **out, const char *name, const tenso_cache_options *opts);

/**
 * Attaches to an existing pool. Its header is checked before anything in it is followed.
 * @param out   receives the handle (release with tenso_cache_close()).
 * @param name  the pool's name.
 * @param opts  only lock_timeout_ms and the TENSO_SHM_ANY_OWNER flag are used; NULL for
 *              defaults.
 * @return TENSO_E_NOT_FOUND when there is no such segment; TENSO_E_IO when another uid owns
 *         it (without TENSO_SHM_ANY_OWNER); TENSO_E_CORRUPT for a segment that
 *         is not a tenso cache (bad magic, layout version, header checksum, geometry, size);
 *         TENSO_E_FULL when max_clients handles are attached (after reclaiming dead ones).
 * @since 1.1
 */
TENSO_API tenso_status tenso_cache_open(tenso_cache **out, const char *name, const tenso_cache_options *opts);

/** Detaches. Views from tenso_cache_get stay valid (and pinned) until freed. NULL is
 *  accepted. @since 1.1 */
TENSO_API void tenso_cache_close(tenso_cache *cache);

/** Removes the pool's name; attached handles keep working. @since 1.1 */
TENSO_API tenso_status tenso_cache_unlink(const char *name);

/** The pool's name, owned by the handle. @since 1.1 */
TENSO_API const char *tenso_cache_name(const tenso_cache *cache);

/**
 * Stores `v` under `key`, encoded straight into the pool (one copy of each body). An existing
 * unpinned entry whose space is large enough is rewritten in place; otherwise the new packet
 * goes to fresh space and the old one is released (or kept until its pins go).
 * @param ttl_seconds  > 0: the entry expires that long after this put; 0: never.
 * @param written_out  may be NULL; receives the packet length.
 * @param cache        the pool.
 * @param key, key_len the key: 1 to TENSO_CACHE_MAX_KEY_BYTES bytes of UTF-8.
 * @param v            the value to encode.
 * @param opts         NULL for defaults.
 * @return TENSO_E_FULL when the packet (or an entry slot) cannot be found room for after
 *         expiry and eviction; TENSO_E_INVALID_ARGUMENT for a bad key or ttl;
 *         TENSO_E_TIMEOUT when the lock was not obtained in time. @since 1.1
 */
TENSO_API tenso_status tenso_cache_put(uint64_t *written_out, tenso_cache *cache, const char *key, size_t key_len,
                                       const tenso_value *v, const tenso_encode_options *opts, double ttl_seconds);

/**
 * The entry under `key` as a zero-copy view into the pool, pinned until tenso_view_free.
 * Counts a hit (and marks the entry most recently used) or a miss.
 * @return TENSO_E_NOT_FOUND when the key is absent or expired. @since 1.1
 */
TENSO_API tenso_status tenso_cache_get(tenso_view **out, tenso_cache *cache, const char *key, size_t key_len,
                                       const tenso_decode_options *opts);

/** Removes `key`. @return TENSO_E_NOT_FOUND when it is absent or expired. @since 1.1 */
TENSO_API tenso_status tenso_cache_delete(tenso_cache *cache, const char *key, size_t key_len);

/** What the cache knows about one entry, without decoding its body. */
typedef struct tenso_cache_entry_info {
    tenso_packet_info packet; /**< the stored packet's header */
    uint64_t alloc_bytes;     /**< space reserved for it in the pool */
    double ttl_seconds;       /**< 0 when it never expires */
    double age_seconds;       /**< since it was put */
    uint32_t pins;            /**< views holding it now, over all processes */
    uint32_t reserved0;       /**< 0 */
    uint64_t reserved[4];     /**< 0; room to grow */
} tenso_cache_entry_info;

/** Fills *out for `key`. Neither a hit nor a miss. @return TENSO_E_NOT_FOUND. @since 1.1 */
TENSO_API tenso_status tenso_cache_info(tenso_cache_entry_info *out, tenso_cache *cache, const char *key,
                                        size_t key_len);

/** *found_out = 1 when `key` is present and not expired, else 0. @since 1.1 */
TENSO_API tenso_status tenso_cache_contains(int *found_out, tenso_cache *cache, const char *key, size_t key_len);

/** Called once per key; a non-zero return stops the walk with TENSO_E_USER. The key bytes
 *  are only valid during the call. */
typedef int (*tenso_cache_key_fn)(const char *key, size_t key_len, void *user);

/** Calls `fn` for every live key, most recently used first. The keys are collected under the
 *  lock and `fn` runs after it is released, so `fn` may call into the cache. @since 1.1 */
TENSO_API tenso_status tenso_cache_keys(tenso_cache *cache, tenso_cache_key_fn fn, void *user);

/** Removes every entry (pinned ones are hidden and released when their pins go). @since 1.1 */
TENSO_API tenso_status tenso_cache_clear(tenso_cache *cache);

/** Counters and occupancy of the pool. */
typedef struct tenso_cache_stats {
    uint64_t entries;        /**< live keys: expired ones are dropped first (what keys lists) */
    uint64_t max_entries;    /**< entry slots */
    uint64_t pool_bytes;     /**< the whole segment */
    uint64_t data_bytes;     /**< the data region */
    uint64_t used_bytes;     /**< data bytes reserved by entries (pinned leftovers included) */
    uint64_t free_bytes;     /**< data bytes not reserved */
    uint64_t hits;           /**< gets that found their key */
    uint64_t misses;         /**< gets that did not */
    uint64_t evictions;      /**< entries dropped to make room */
    uint64_t expirations;    /**< entries dropped because their ttl passed */
    uint64_t pinned_entries; /**< entries with at least one pin */
    uint64_t recoveries;     /**< times a lock holder died and the pool was rebuilt */
    uint64_t clients;        /**< handles attached now */
    uint64_t reserved[4];    /**< 0; room to grow */
} tenso_cache_stats;

/** Fills *out. hit rate = hits / (hits + misses). @since 1.1 */
TENSO_API tenso_status tenso_cache_stats_get(tenso_cache_stats *out, tenso_cache *cache);

/**
 * Checks every invariant of the pool (entries inside the data region and disjoint, index and
 * LRU list consistent with the entries, free space accounted, pin counts equal to the pin
 * records, every stored packet's header valid). O(entries); for tests and tooling.
 * @return TENSO_E_CORRUPT with the first broken invariant in the message. @since 1.1
 */
TENSO_API tenso_status tenso_cache_check(tenso_cache *cache);

TENSO_END_DECL

#endif /* TENSO_SHM_H */
