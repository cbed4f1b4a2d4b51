// shm.hpp - POSIX shared-memory objects: names, create/open/unlink with specific statuses, and
// mappings shared by the views that point into them. Segments (one packet at offset 0, the
// layout of upstream's TensoShm) are built on these; so is the cache pool (cache.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "format/codec.hpp"

namespace tenso {

// "x" -> "/x", as Python's multiprocessing.shared_memory does. Fails with INVALID_ARGUMENT for
// an empty name, one over 255 bytes, a '/' after the leading one, or "." and "..".
std::string shm_name(const char *name);

// One mmap of a shared-memory object; unmapped when the last owner (handle or view) goes.
struct ShmMapping {
    uint8_t *addr = nullptr;
    size_t len = 0;
    bool writable = false;
    int fd = -1;     // kept to ask for the size where the mapping is not guarded
    int guard = -1;  // fault_guard slot: a truncation turns the lost pages into zeros and trips it
    const std::atomic<uint32_t> *tripped = nullptr;  // the slot's flag
    // TRUNCATED when the object is now shorter than the mapping. Guarded (the usual case): one
    // load of the mapping's last byte, which faults if any whole page was cut off, and a look
    // at the guard; no system call. Unguarded: lseek to the end.
    void check_size(const std::string &name) const {
        if (!tripped) return check_size_slowly(name);
        // Truncation takes whole pages from the end, so if any went, the last one did.
        (void)*reinterpret_cast<volatile const uint8_t *>(addr + len - 1);
        check_intact(name);
    }
    // TRUNCATED when the guard absorbed a fault in this mapping: an operation that started
    // before the truncation may have read zeros where the lost pages were, so its result is
    // void. Call after the operation's last access (or when it failed).
    void check_intact(const std::string &name) const {
        if (tripped && tripped->load(std::memory_order_acquire)) fail_truncated(name);
    }
    // After creating and filling an object: TRUNCATED, naming /dev/shm as full, when pages
    // were lost under the writes (tmpfs had no room for them).
    void check_filled(const std::string &name) const;
    bool guarded() const { return tripped != nullptr; }
    [[noreturn]] void fail_truncated(const std::string &name) const;
    void check_size_slowly(const std::string &name) const;
    ShmMapping() = default;
    ShmMapping(const ShmMapping &) = delete;  // exactly one owner unmaps
    ShmMapping &operator=(const ShmMapping &) = delete;
    ~ShmMapping();
};

// shm_open with O_CREAT|O_EXCL (after unlinking a leftover when `replace`), sized to `size`
// and mapped read-write; `populate` pre-faults the pages. EXISTS / INVALID_ARGUMENT / IO.
std::shared_ptr<ShmMapping> shm_create(const std::string &name, uint64_t size, bool replace, bool populate);
// Opens and maps an existing object at its current size. NOT_FOUND / IO; a 0-byte object is
// TRUNCATED-free: the caller decides (min_size > size fails with `too_small_status`). An object
// owned by another uid than our effective one is refused (IO) unless `any_owner`: anyone who
// can write it can change what we read, and a pool's mutex with it.
std::shared_ptr<ShmMapping> shm_open_existing(const std::string &name, bool writable, bool populate, uint64_t min_size,
                                              int32_t too_small_status, bool any_owner);
// True while an object looks unfinished by its creator: 0 bytes long (not yet sized), or its
// first `prefix` bytes still zero (where a format writes its magic last). False when absent,
// or owned by another uid without `any_owner` (the open refuses it at once).
bool shm_unfinished(const std::string &name, size_t prefix, bool any_owner);
// NOT_FOUND when there is no such object.
void shm_remove(const std::string &name);

// A segment: one packet at offset 0 of a named object.
class Segment {
public:
    static std::unique_ptr<Segment> create(const char *name, uint64_t size, bool replace);
    // Sized by the encoder's exact plan (LZ4 bound when compressing), then encoded into it.
    static std::unique_ptr<Segment> create_for(const char *name, const Value &v, const EncodeOptions &opts,
                                               bool replace, uint64_t *written);
    static std::unique_ptr<Segment> open(const char *name, bool writable, bool any_owner);

    // *written: the packet length, also when it does not fit (BUFFER_TOO_SMALL: size needed).
    void put(const Value &v, const EncodeOptions &opts, uint64_t *written);
    std::unique_ptr<View> get(const Limits &limits) const;

    uint8_t *data() const { return map_->addr; }
    uint64_t size() const { return map_->len; }
    const std::string &name() const { return given_; }

private:
    std::string given_;
    std::shared_ptr<ShmMapping> map_;
};

}  // namespace tenso
