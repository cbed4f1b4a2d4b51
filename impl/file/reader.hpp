// reader.hpp - files of many named tensors, whatever their format: every format reader
// (archive.hpp: tenso archives and single-packet files; safetensors.hpp: safetensors and
// bintensors) fills one Catalog (the index, checked as hostile input at open) over a
// read-only mapping of the file, which one Archive serves; every format's writer is an
// ArchiveWriter. The formats know this file, never each other.
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "tenso/tenso.h"
#include "format/codec.hpp"
#include "io/io.hpp"

namespace tenso {

// Caps on what a file may claim.
struct ArchiveLimits {
    uint64_t max_index_bytes = 100000000;
    uint64_t max_tensors = 10000000;
};

struct ArchiveOptions {
    int format = 0;           // TENSO_FORMAT_*; 0 detects it
    bool verify_all = false;  // verify every entry at open
    bool no_verify = false;   // skip the index hashes on get
    ArchiveLimits limits;
};

struct ArchiveWriteOptions {
    int format = 0;                       // TENSO_FORMAT_*; 0: from the path's extension, else a tenso archive
    uint32_t alignment = 0;               // tenso archives: 0 = 64
    bool hash = true;                     // tenso archives: XXH3 of every packet in the index
    EncodeOptions encode;                 // tenso archives: how packets are encoded
    bool encode_alignment_given = false;  // else packets take the archive's alignment
};

// One entry as a caller sees it (name and shape point into the Archive).
struct ArchiveEntry {
    const char *name = nullptr;
    size_t name_len = 0;
    int kind = 0, dtype = 0;
    uint32_t ndim = 0, flags = 0;
    const uint64_t *shape = nullptr;
    uint64_t offset = 0, stored_bytes = 0, nbytes = 0, data_offset = 0, xxh3 = 0;
};

// verify() progress: (bytes done, bytes in all); true stops the walk with TENSO_E_USER.
using ArchiveProgress = std::function<bool(uint64_t done, uint64_t total)>;

// What a format reader produces: the entries in file order, over strings that live either in
// the mapping (tenso archives, packets) or in `owned` (parsed headers).
struct Catalog {
    struct Entry {
        uint64_t name_off = 0;  // from `names`
        uint32_t name_len = 0;
        uint8_t kind = 0, dtype = 0, ndim = 0, flags = 0;  // flags: TENSO_ENTRY_*
        uint64_t shape_off = 0;                            // into `dims`
        uint64_t offset = 0, stored = 0, nbytes = 0, data_offset = 0, xxh3 = 0;
    };
    struct Meta {
        uint64_t key_off = 0, key_len = 0, val_off = 0, val_len = 0;  // from `meta_base`
    };
    int format = 0;
    std::vector<Entry> entries;
    std::vector<uint64_t> dims;
    std::string owned;
    const char *names = nullptr;
    const char *meta_base = nullptr;
    std::vector<Meta> meta;
    // tenso archives: the index's hash table (u32 slots, entry + 1, linear probing)
    const uint8_t *table = nullptr;
    uint64_t table_mask = 0;
    uint32_t alignment = 0;  // tenso archives: every packet's file offset is a multiple of it

    std::string name(const Entry &e) const { return std::string(names + e.name_off, e.name_len); }
};

class Archive {
public:
    static std::unique_ptr<Archive> open(const char *path, const ArchiveOptions &opts);
    ~Archive();

    int format() const { return cat_.format; }
    uint32_t alignment() const { return cat_.alignment; }
    uint64_t count() const { return cat_.entries.size(); }
    ArchiveEntry entry(uint64_t index) const;
    bool find(uint64_t *index_out, const char *name, size_t len) const;
    std::unique_ptr<View> get(uint64_t index, Limits lim);
    void read(void *dst, uint64_t index, uint64_t offset, uint64_t len) const;
    uint64_t metadata_count() const { return cat_.meta.size(); }
    void metadata_at(const char **k, size_t *klen, const char **v, size_t *vlen, uint64_t index) const;
    bool metadata_find(const char **v, size_t *vlen, const char *key, size_t key_len) const;
    // Checks every stored hash and (packets) that every packet decodes; throws the first
    // failure after storing its index in *bad.
    void verify(uint64_t *bad, const ArchiveProgress &progress);

private:
    Archive() = default;
    const Catalog::Entry &at(uint64_t index) const;
    void check_size(uint64_t end) const;  // TRUNCATED when the file now ends before `end`
    // check_size of the whole file when `p` (names, metadata) points into the mapping, as it
    // does for tenso archives and packet files; safetensors/bintensors headers are copied.
    void check_mapped(const void *p) const;
    std::string name_of(const Catalog::Entry &e) const;  // for messages: check_mapped first
    void check_hash(uint64_t index);
    std::unique_ptr<View> decode_entry(uint64_t index, Limits lim);

    Catalog cat_;
    std::shared_ptr<const FileMap> map_;
    int fd_ = -1;  // for read(): pread, never the mapping
    bool no_verify_ = false;
    // Per entry: 0 not yet hashed, 1 hash matched, 2 mismatch. Set once, read by any thread.
    std::unique_ptr<std::atomic<uint8_t>[]> verified_;
    std::vector<uint64_t> by_name_;  // entry indices sorted by name (formats without a table)
    std::vector<uint64_t> meta_by_key_;
};

// Streaming writers. add() validates first and writes nothing on a refused tensor, so the
// writer stays usable; a failed write breaks it (finish then fails, the target untouched).
class ArchiveWriter {
public:
    static std::unique_ptr<ArchiveWriter> open(const char *path, const ArchiveWriteOptions &opts);
    virtual ~ArchiveWriter() = default;

    void add(const char *name, size_t len, const Value &v);
    void set_metadata(const std::string &key, const std::string &value);
    void finish();

protected:
    explicit ArchiveWriter(const char *path) : file_(path) {}
    virtual void add_checked(const std::string &name, const Value &v) = 0;
    virtual void finish_file() = 0;

    TempFile file_;
    std::vector<std::pair<std::string, std::string>> meta_;  // in first-set order
    bool broken_ = false;                                    // set around writes: a failure there abandons the file

private:
    std::unordered_set<std::string> names_;
    bool finished_ = false;
};

}  // namespace tenso
