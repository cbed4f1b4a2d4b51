// shm.cpp - the extern "C" firewall for tenso/shm.h: shared-memory segments and the
// multi-process cache (engine: impl/shm/shm.cpp, impl/shm/cache*.cpp).
#include <cstring>
#include <string>

#include "convert.hpp"
#include "firewall.hpp"

#include "shm/cache.hpp"
#include "shm/shm.hpp"

struct tenso_shm {
    std::unique_ptr<tenso::Segment> seg;
};
struct tenso_cache {
    std::shared_ptr<tenso::Cache> cache;  // pinned views share it, so it outlives close
};

using namespace tenso::capi;

namespace {
const tenso::Value &value_of(const tenso_value *v) { return v->v; }
}  // namespace

extern "C" {

/* ---------------------------------------------------------------- segments */

tenso_status tenso_shm_create(tenso_shm **out, const char *name, uint64_t size, uint32_t flags) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(name);
    if (flags & ~uint32_t(TENSO_SHM_REPLACE)) return set_error(TENSO_E_INVALID_ARGUMENT, "unknown flags");
    TENSO_API_BEGIN
    auto h = std::make_unique<tenso_shm>();
    h->seg = tenso::Segment::create(name, size, flags & TENSO_SHM_REPLACE);
    *out = h.release();
    TENSO_API_END
}

tenso_status tenso_shm_create_for(tenso_shm **out, uint64_t *written_out, const char *name, const tenso_value *v,
                                  const tenso_encode_options *opts, uint32_t flags) {
    CHECK_ARG(out);
    *out = nullptr;
    if (written_out) *written_out = 0;
    CHECK_ARG(name);
    CHECK_ARG(v);
    if (flags & ~uint32_t(TENSO_SHM_REPLACE)) return set_error(TENSO_E_INVALID_ARGUMENT, "unknown flags");
    TENSO_API_BEGIN
    auto h = std::make_unique<tenso_shm>();
    h->seg =
        tenso::Segment::create_for(name, value_of(v), encode_options(opts), flags & TENSO_SHM_REPLACE, written_out);
    *out = h.release();
    TENSO_API_END
}

tenso_status tenso_shm_open_flags(tenso_shm **out, const char *name, uint32_t flags) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(name);
    if (flags & ~uint32_t(TENSO_SHM_WRITABLE | TENSO_SHM_ANY_OWNER))
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown flags");
    TENSO_API_BEGIN
    auto h = std::make_unique<tenso_shm>();
    h->seg = tenso::Segment::open(name, flags & TENSO_SHM_WRITABLE, flags & TENSO_SHM_ANY_OWNER);
    *out = h.release();
    TENSO_API_END
}

tenso_status tenso_shm_open(tenso_shm **out, const char *name, int writable) {
    return tenso_shm_open_flags(out, name, writable ? TENSO_SHM_WRITABLE : 0u);  // 1.1: any non-zero
}

tenso_status tenso_shm_put(uint64_t *written_out, tenso_shm *shm, const tenso_value *v,
                           const tenso_encode_options *opts) {
    if (written_out) *written_out = 0;
    CHECK_ARG(shm);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    uint64_t w = 0;
    struct Report {
        uint64_t *out, &w;
        ~Report() {
            if (out) *out = w;
        }
    } report{written_out, w};
    shm->seg->put(value_of(v), encode_options(opts), &w);
    TENSO_API_END
}

tenso_status tenso_shm_get(tenso_view **out, const tenso_shm *shm, const tenso_decode_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(shm);
    TENSO_API_BEGIN
    *out = release_view(shm->seg->get(limits(opts)));
    TENSO_API_END
}

void *tenso_shm_data(const tenso_shm *shm) { return shm ? shm->seg->data() : nullptr; }
uint64_t tenso_shm_size(const tenso_shm *shm) { return shm ? shm->seg->size() : 0; }
const char *tenso_shm_name(const tenso_shm *shm) { return shm ? shm->seg->name().c_str() : nullptr; }

void tenso_shm_close(tenso_shm *shm) { delete shm; }

tenso_status tenso_shm_unlink(const char *name) {
    CHECK_ARG(name);
    TENSO_API_BEGIN
    tenso::shm_remove(tenso::shm_name(name));
    TENSO_API_END
}

/* ---------------------------------------------------------------- cache */

tenso_status tenso_cache_options_init(tenso_cache_options *opts, uint32_t version) {
    clear_error();
    CHECK_ARG(opts);
    if (version != TENSO_CACHE_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_cache_options version");
    *opts = tenso_cache_options TENSO_CACHE_OPTIONS_INIT;
    return TENSO_OK;
}

tenso_status tenso_cache_create(tenso_cache **out, const char *name, const tenso_cache_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(name);
    TENSO_API_BEGIN
    auto h = std::make_unique<tenso_cache>();
    h->cache = tenso::Cache::create(name, cache_options(opts));
    *out = h.release();
    TENSO_API_END
}

tenso_status tenso_cache_open(tenso_cache **out, const char *name, const tenso_cache_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(name);
    TENSO_API_BEGIN
    auto h = std::make_unique<tenso_cache>();
    const tenso::CacheOptions o = cache_options(opts);
    h->cache = tenso::Cache::open(name, o.lock_timeout_ms, o.any_owner);
    *out = h.release();
    TENSO_API_END
}

void tenso_cache_close(tenso_cache *cache) { delete cache; }

tenso_status tenso_cache_unlink(const char *name) {
    CHECK_ARG(name);
    TENSO_API_BEGIN
    tenso::shm_remove(tenso::shm_name(name));
    TENSO_API_END
}

const char *tenso_cache_name(const tenso_cache *cache) { return cache ? cache->cache->name().c_str() : nullptr; }

tenso_status tenso_cache_put(uint64_t *written_out, tenso_cache *cache, const char *key, size_t key_len,
                             const tenso_value *v, const tenso_encode_options *opts, double ttl_seconds) {
    if (written_out) *written_out = 0;
    CHECK_ARG(cache);
    CHECK_ARG(key || !key_len);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    uint64_t w = 0;
    cache->cache->put(key, key_len, value_of(v), encode_options(opts), ttl_seconds, &w);
    if (written_out) *written_out = w;
    TENSO_API_END
}

tenso_status tenso_cache_get(tenso_view **out, tenso_cache *cache, const char *key, size_t key_len,
                             const tenso_decode_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(cache);
    CHECK_ARG(key || !key_len);
    TENSO_API_BEGIN
    *out = release_view(cache->cache->get(key, key_len, limits(opts)));
    TENSO_API_END
}

tenso_status tenso_cache_delete(tenso_cache *cache, const char *key, size_t key_len) {
    CHECK_ARG(cache);
    CHECK_ARG(key || !key_len);
    TENSO_API_BEGIN
    cache->cache->remove(key, key_len);
    TENSO_API_END
}

tenso_status tenso_cache_info(tenso_cache_entry_info *out, tenso_cache *cache, const char *key, size_t key_len) {
    CHECK_ARG(out);
    CHECK_ARG(cache);
    CHECK_ARG(key || !key_len);
    TENSO_API_BEGIN
    fill(out, cache->cache->info(key, key_len));
    TENSO_API_END
}

tenso_status tenso_cache_contains(int *found_out, tenso_cache *cache, const char *key, size_t key_len) {
    CHECK_ARG(found_out);
    *found_out = 0;
    CHECK_ARG(cache);
    CHECK_ARG(key || !key_len);
    TENSO_API_BEGIN
    *found_out = cache->cache->contains(key, key_len) ? 1 : 0;
    TENSO_API_END
}

tenso_status tenso_cache_keys(tenso_cache *cache, tenso_cache_key_fn fn, void *user) {
    CHECK_ARG(cache);
    CHECK_ARG(fn);
    TENSO_API_BEGIN
    // Collected under the lock, called after it: fn may call back into the cache.
    for (const std::string &k : cache->cache->keys())
        if (fn(k.data(), k.size(), user) != 0) tenso::fail(TENSO_E_USER, "key callback stopped the walk");
    TENSO_API_END
}

tenso_status tenso_cache_clear(tenso_cache *cache) {
    CHECK_ARG(cache);
    TENSO_API_BEGIN
    cache->cache->clear();
    TENSO_API_END
}

tenso_status tenso_cache_stats_get(tenso_cache_stats *out, tenso_cache *cache) {
    CHECK_ARG(out);
    CHECK_ARG(cache);
    TENSO_API_BEGIN
    fill(out, cache->cache->stats());
    TENSO_API_END
}

tenso_status tenso_cache_check(tenso_cache *cache) {
    CHECK_ARG(cache);
    TENSO_API_BEGIN
    cache->cache->check();
    TENSO_API_END
}

}  // extern "C"
