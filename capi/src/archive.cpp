// archive.cpp - the extern "C" firewall for tenso/archive.h: multi-tensor files (tenso
// archives, single packets, safetensors, bintensors) over impl/file/reader.hpp.
#include "convert.hpp"

#include <cstddef>
#include <cstring>
#include "firewall.hpp"

#include "file/reader.hpp"
#include "tenso/archive.h"

struct tenso_archive {
    std::unique_ptr<tenso::Archive> a;
};
struct tenso_archive_writer {
    std::unique_ptr<tenso::ArchiveWriter> w;
};

using namespace tenso::capi;

extern "C" {

const char *tenso_format_name(tenso_format format) {
    switch (format) {
    case TENSO_FORMAT_ARCHIVE: return "tenso";
    case TENSO_FORMAT_SAFETENSORS: return "safetensors";
    case TENSO_FORMAT_BINTENSORS: return "bintensors";
    case TENSO_FORMAT_PACKET: return "packet";
    default: return "";
    }
}

tenso_status tenso_archive_options_init(tenso_archive_options *opts, uint32_t version) {
    clear_error();
    CHECK_ARG(opts);
    if (version != TENSO_ARCHIVE_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_archive_options version");
    *opts = tenso_archive_options TENSO_ARCHIVE_OPTIONS_INIT;
    return TENSO_OK;
}

tenso_status tenso_archive_open(tenso_archive **out, const char *path, const tenso_archive_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(path);
    TENSO_API_BEGIN
    auto a = tenso::Archive::open(path, archive_options(opts));
    *out = new tenso_archive{std::move(a)};
    TENSO_API_END
}

void tenso_archive_close(tenso_archive *a) { delete a; }

tenso_format tenso_archive_format(const tenso_archive *a) { return a ? a->a->format() : 0; }

uint32_t tenso_archive_alignment(const tenso_archive *a) { return a ? a->a->alignment() : 0; }

uint64_t tenso_archive_count(const tenso_archive *a) { return a ? a->a->count() : 0; }

tenso_status tenso_archive_entry_at(tenso_archive_entry *out, const tenso_archive *a, uint64_t index) {
    CHECK_ARG(out);
    CHECK_ARG(a);
    TENSO_API_BEGIN
    fill(out, a->a->entry(index));
    TENSO_API_END
}

tenso_status tenso_archive_find(uint64_t *index_out, const tenso_archive *a, const char *name, size_t name_len) {
    clear_error();
    CHECK_ARG(index_out);
    CHECK_ARG(a);
    CHECK_ARG(name || !name_len);
    TENSO_API_BEGIN
    if (!a->a->find(index_out, name ? name : "", name_len))
        tenso::fail(TENSO_E_NOT_FOUND, "no tensor named '" + std::string(name ? name : "", name_len) + "'");
    TENSO_API_END
}

tenso_status tenso_archive_get(tenso_view **out, tenso_archive *a, uint64_t index, const tenso_decode_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(a);
    TENSO_API_BEGIN
    *out = release_view(a->a->get(index, limits(opts)));
    TENSO_API_END
}

tenso_status tenso_archive_read(void *dst, tenso_archive *a, uint64_t index, uint64_t offset, uint64_t len) {
    CHECK_ARG(dst || !len);
    CHECK_ARG(a);
    TENSO_API_BEGIN
    a->a->read(dst, index, offset, len);
    TENSO_API_END
}

uint64_t tenso_archive_metadata_count(const tenso_archive *a) { return a ? a->a->metadata_count() : 0; }

tenso_status tenso_archive_metadata_at(const char **key_out, size_t *key_len_out, const char **value_out,
                                       size_t *value_len_out, const tenso_archive *a, uint64_t index) {
    CHECK_ARG(key_out);
    CHECK_ARG(key_len_out);
    CHECK_ARG(value_out);
    CHECK_ARG(value_len_out);
    CHECK_ARG(a);
    TENSO_API_BEGIN
    a->a->metadata_at(key_out, key_len_out, value_out, value_len_out, index);
    TENSO_API_END
}

tenso_status tenso_archive_metadata_find(const char **value_out, size_t *value_len_out, const tenso_archive *a,
                                         const char *key, size_t key_len) {
    clear_error();
    CHECK_ARG(value_out);
    CHECK_ARG(value_len_out);
    CHECK_ARG(a);
    CHECK_ARG(key || !key_len);
    TENSO_API_BEGIN
    if (!a->a->metadata_find(value_out, value_len_out, key ? key : "", key_len))
        tenso::fail(TENSO_E_NOT_FOUND, "no metadata key '" + std::string(key ? key : "", key_len) + "'");
    TENSO_API_END
}

tenso_status tenso_archive_verify(uint64_t *bad_index_out, tenso_archive *a, tenso_progress_fn progress, void *user) {
    CHECK_ARG(a);
    TENSO_API_BEGIN
    uint64_t bad = 0;
    tenso::ArchiveProgress report;
    if (progress) report = [progress, user](uint64_t done, uint64_t total) { return progress(done, total, user) != 0; };
    a->a->verify(bad_index_out ? bad_index_out : &bad, report);
    TENSO_API_END
}

tenso_status tenso_archive_write_options_init(tenso_archive_write_options *opts, uint32_t version) {
    clear_error();
    CHECK_ARG(opts);
    if (version < 1 || version > TENSO_ARCHIVE_WRITE_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_archive_write_options version");
    tenso_archive_write_options d = TENSO_ARCHIVE_WRITE_OPTIONS_INIT;
    d.version = version;
    if (version == 1) {  // the 1.1 layout: a version 1 encode struct, without `threads`
        d.encode.version = 1;
        std::memcpy(opts, &d, offsetof(tenso_archive_write_options, encode.threads));
    } else {
        *opts = d;
    }
    return TENSO_OK;
}

tenso_status tenso_archive_writer_open(tenso_archive_writer **out, const char *path,
                                       const tenso_archive_write_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(path);
    TENSO_API_BEGIN
    auto w = tenso::ArchiveWriter::open(path, archive_write_options(opts));
    *out = new tenso_archive_writer{std::move(w)};
    TENSO_API_END
}

tenso_status tenso_archive_writer_add(tenso_archive_writer *w, const char *name, size_t name_len,
                                      const tenso_value *v) {
    CHECK_ARG(w);
    CHECK_ARG(name || !name_len);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    w->w->add(name, name_len, v->v);
    TENSO_API_END
}

tenso_status tenso_archive_writer_set_metadata(tenso_archive_writer *w, const char *key, size_t key_len,
                                               const char *value, size_t value_len) {
    CHECK_ARG(w);
    CHECK_ARG(key || !key_len);
    CHECK_ARG(value || !value_len);
    TENSO_API_BEGIN
    w->w->set_metadata(std::string(key ? key : "", key_len), std::string(value ? value : "", value_len));
    TENSO_API_END
}

tenso_status tenso_archive_writer_finish(tenso_archive_writer *w) {
    CHECK_ARG(w);
    TENSO_API_BEGIN
    w->w->finish();
    TENSO_API_END
}

void tenso_archive_writer_free(tenso_archive_writer *w) { delete w; }

}  // extern "C"
