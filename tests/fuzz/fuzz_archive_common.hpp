// fuzz_archive_common.hpp - what fuzz_archive, fuzz_safetensors and fuzz_bintensors share: the
// input becomes a file (a memfd, opened by its /proc path, so nothing touches the disk), is
// opened as the given format, and whatever opens is walked through every read entry point
// while the answers are checked against each other and against the file's bounds.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fuzz_common.hpp"
#include "tenso/archive.h"

namespace fuzz {

inline void run_archive(const uint8_t *data, size_t size, tenso_format format) {
    int fd = ::memfd_create("fuzz_archive", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create failed");
    for (size_t done = 0; done < size;) {
        ssize_t w = ::write(fd, data + done, size - done);
        FUZZ_CHECK(w > 0, "write to memfd failed");
        done += size_t(w);
    }
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tenso_archive_options o = TENSO_ARCHIVE_OPTIONS_INIT;
    o.format = format;
    o.max_index_bytes = 1 << 20;  // keeps a claimed header from costing more than the input
    tenso_archive *a = nullptr;
    tenso_status st = tenso_archive_open(&a, path, &o);
    FUZZ_CHECK((st == TENSO_OK) == (a != nullptr), "open returned %s with handle %p", tenso_status_name(st),
               static_cast<void *>(a));
    if (st != TENSO_OK) {
        FUZZ_CHECK(tenso_last_error()[0] != '\0', "%s without a message", tenso_status_name(st));
        FUZZ_CHECK(st != TENSO_E_INTERNAL && st != TENSO_E_INVALID_ARGUMENT && st != TENSO_E_IO,
                   "open failed with %s: %s", tenso_status_name(st), tenso_last_error());
        ::close(fd);
        return;
    }
    FUZZ_CHECK(tenso_archive_format(a) == format, "format %d, opened as %d", tenso_archive_format(a), format);
    const uint64_t n = tenso_archive_count(a);
    uint64_t prev_end = 0;
    for (uint64_t i = 0; i < n; ++i) {
        tenso_archive_entry e;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_archive_entry_at(&e, a, i));
        FUZZ_CHECK(e.offset >= prev_end && e.stored_bytes <= size && e.offset <= size - e.stored_bytes,
                   "entry %llu [%llu, +%llu) is out of order or out of the file", (unsigned long long)i,
                   (unsigned long long)e.offset, (unsigned long long)e.stored_bytes);
        prev_end = e.offset + e.stored_bytes;
        FUZZ_CHECK(valid_utf8(reinterpret_cast<const uint8_t *>(e.name), e.name_len), "name is not UTF-8");
        uint64_t found = ~uint64_t(0);
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_archive_find(&found, a, e.name, e.name_len));
        FUZZ_CHECK(found == i, "find gave %llu for entry %llu", (unsigned long long)found, (unsigned long long)i);
        if (e.data_offset)
            FUZZ_CHECK(e.data_offset >= e.offset && e.nbytes <= e.offset + e.stored_bytes - e.data_offset,
                       "body outside its stored bytes");
        tenso_view *v = nullptr;
        if (tenso_archive_get(&v, a, i, nullptr) == TENSO_OK) {
            FUZZ_CHECK(tenso_view_kind(v) == e.kind, "view kind %d, entry %d", tenso_view_kind(v), e.kind);
            touch(tenso_view_data(v), size_t(tenso_view_kind(v) == TENSO_KIND_DENSE ? tenso_view_nbytes(v) : 0));
            if (e.kind == TENSO_KIND_DENSE && e.data_offset) {
                uint8_t buf[16];
                size_t k = size_t(e.nbytes < 16 ? e.nbytes : 16);
                FUZZ_CHECK_STATUS(TENSO_OK, tenso_archive_read(buf, a, i, 0, k));
                FUZZ_CHECK(same_bytes(buf, tenso_view_data(v), k), "read and get disagree");
                FUZZ_CHECK(tenso_view_nbytes(v) == e.nbytes, "nbytes disagree");
            }
            tenso_view_free(v);
        } else {
            FUZZ_CHECK(v == nullptr, "failed get handed out a view");
        }
    }
    for (uint64_t j = 0; j < tenso_archive_metadata_count(a); ++j) {
        const char *k, *val, *val2;
        size_t kl, vl, vl2;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_archive_metadata_at(&k, &kl, &val, &vl, a, j));
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_archive_metadata_find(&val2, &vl2, a, k, kl));
        FUZZ_CHECK(val == val2 && vl == vl2, "metadata_find disagrees with metadata_at");
    }
    tenso_archive_verify(nullptr, a, nullptr, nullptr);
    tenso_archive_close(a);
    ::close(fd);
}

}  // namespace fuzz
