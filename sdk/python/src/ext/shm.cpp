// shm.cpp - tenso/shm.h for Python: single-packet segments (tenso._tenso.Shm) and the
// multi-process tensor cache (tenso._tenso.Cache). The Python classes tenso.TensoShm and
// tenso.TensoCache (src/tenso/shm.py) wrap these with upstream's names and exceptions.
//
// Lifetimes. Every array handed out is a view whose numpy base is a Packet holding the
// tenso_view: for segments the view keeps the mapping, for the cache it also holds the entry's
// pin, so the pin goes exactly when the last array (or view of one) is garbage collected.
// Shm also exports the segment through the buffer protocol (read-only when the mapping is). Like
// mmap, it counts its exports and close() raises BufferError while one is alive: a memoryview or
// np.frombuffer array is raw memory with no reference to the mapping of its own. Arrays from get()
// hold the view (and so the mapping) themselves: close() leaves them valid.
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"

namespace tpy {

namespace {

// Runs `fn` (a libtenso call) without the GIL: cache calls may wait for the process-shared lock,
// and shared-memory encodes copy whole bodies; other Python threads run meanwhile.
template <class Fn>
tenso_status nogil(Fn &&fn) {
    py::gil_scoped_release release;
    return fn();
}

// UTF-8 bytes of a str key; a ValueError (upstream's) for keys longer than the cache allows,
// checked here so the message names the limit the way upstream words it. The bytes are the str's
// own cached UTF-8 (no copy: gets are latency-bound); they stay valid, also without the GIL, while
// the caller holds the str.
std::string_view key_bytes(const py::str &key) {
    Py_ssize_t len = 0;
    const char *utf8 = PyUnicode_AsUTF8AndSize(key.ptr(), &len);
    if (!utf8) throw py::error_already_set();
    if (len > TENSO_CACHE_MAX_KEY_BYTES)
        raise_value_error("Key too long: " + std::to_string(len) + " bytes (max " +
                          std::to_string(TENSO_CACHE_MAX_KEY_BYTES) + ")");
    return std::string_view(utf8, size_t(len));
}

// ---- segments -------------------------------------------------------------------------------

struct Shm : Handle<tenso_shm, tenso_shm_close> {
    Shm(tenso_shm *h, bool writable_) : Handle(h, "the shared-memory segment is closed"), writable(writable_) {}
    const bool writable;     // mapped PROT_WRITE: a writable export would fault on the first write
    Py_ssize_t exports = 0;  // buffers exported and not released; the GIL guards it
};

std::unique_ptr<Shm> shm_create(const std::string &name, uint64_t size, bool replace) {
    tenso_shm *h = nullptr;
    check(nogil([&] { return tenso_shm_create(&h, name.c_str(), size, replace ? TENSO_SHM_REPLACE : 0u); }));
    return std::make_unique<Shm>(h, true);
}

std::unique_ptr<Shm> shm_open(const std::string &name, bool writable, bool any_owner) {
    const uint32_t flags = (writable ? TENSO_SHM_WRITABLE : 0u) | (any_owner ? TENSO_SHM_ANY_OWNER : 0u);
    tenso_shm *h = nullptr;
    check(nogil([&] { return tenso_shm_open_flags(&h, name.c_str(), flags); }));
    return std::make_unique<Shm>(h, writable);
}

// (Shm, packet length): a segment sized for the value, with the value encoded into it.
py::tuple shm_create_for(const std::string &name, const Value &value, bool check_integrity, bool compress,
                         int64_t alignment, bool replace) {
    const tenso_encode_options o = make_options(check_integrity, compress, alignment);
    tenso_shm *h = nullptr;
    uint64_t written = 0;
    check(nogil([&] {
        return tenso_shm_create_for(&h, &written, name.c_str(), value.get(), &o, replace ? TENSO_SHM_REPLACE : 0u);
    }));
    return py::make_tuple(py::cast(std::make_unique<Shm>(h, true)), written);
}

void shm_close(Shm &self) {
    // mmap.close()'s exception and wording: unmapping now would free memory a memoryview points at.
    if (self.exports > 0) throw py::buffer_error("cannot close exported pointers exist");
    self.close();
}

// The buffer protocol by hand: pybind11's def_buffer has no release hook to count exports with.
int shm_getbuffer(PyObject *obj, Py_buffer *view, int flags) {
    view->obj = nullptr;
    try {
        Shm &self = py::handle(obj).cast<Shm &>();
        tenso_shm *h = self.get();  // ValueError when closed
        // BufferError for a PyBUF_WRITABLE request on a read-only mapping.
        if (PyBuffer_FillInfo(view, obj, tenso_shm_data(h), py::ssize_t(tenso_shm_size(h)), self.writable ? 0 : 1,
                              flags) != 0)
            return -1;
        view->internal = &self;
        ++self.exports;
        return 0;
    } catch (py::error_already_set &e) {
        e.restore();
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_BufferError, e.what());
    }
    return -1;
}

void shm_releasebuffer(PyObject *, Py_buffer *view) { --static_cast<Shm *>(view->internal)->exports; }

uint64_t shm_put(const Shm &self, const Value &value, bool check_integrity, bool compress, int64_t alignment) {
    const tenso_encode_options o = make_options(check_integrity, compress, alignment);
    const auto held = self.lease();
    tenso_shm *h = held.get();
    uint64_t written = 0;
    const tenso_status st = nogil([&] { return tenso_shm_put(&written, h, value.get(), &o); });
    if (st == TENSO_E_BUFFER_TOO_SMALL) {
        // Upstream raises MemoryError here, with this wording.
        raise_error(TENSO_E_FULL, "Packet (" + std::to_string(written) + " bytes) exceeds SHM size (" +
                                      std::to_string(tenso_shm_size(h)) + " bytes)");
    }
    check(st);
    return written;
}

py::object shm_get(const Shm &self, bool copy) {
    const auto held = self.lease();
    const tenso_shm *h = held.get();
    tenso_view *v = nullptr;
    check(nogil([&] { return tenso_shm_get(&v, h, nullptr); }));
    return view_to_python(v, copy);
}

// ---- the cache --------------------------------------------------------------------------------

struct Cache : Handle<tenso_cache, tenso_cache_close> {
    explicit Cache(tenso_cache *h) : Handle(h, "TensoCache is closed") {}
};

tenso_cache_options cache_options(uint64_t size, uint32_t max_entries, uint32_t max_clients, uint32_t max_pins,
                                  uint32_t lock_timeout_ms, bool replace) {
    tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
    o.flags = replace ? TENSO_SHM_REPLACE : 0u;
    o.size = size;
    o.max_entries = max_entries;
    o.max_clients = max_clients;
    o.max_pins = max_pins;
    o.lock_timeout_ms = lock_timeout_ms;
    return o;
}

std::unique_ptr<Cache> cache_create(const std::string &name, uint64_t size, uint32_t max_entries, uint32_t max_clients,
                                    uint32_t max_pins, uint32_t lock_timeout_ms, bool replace) {
    const tenso_cache_options o = cache_options(size, max_entries, max_clients, max_pins, lock_timeout_ms, replace);
    tenso_cache *h = nullptr;
    check(nogil([&] { return tenso_cache_create(&h, name.c_str(), &o); }));
    return std::make_unique<Cache>(h);
}

std::unique_ptr<Cache> cache_open(const std::string &name, uint32_t lock_timeout_ms, bool any_owner) {
    tenso_cache_options o = cache_options(0, 0, 0, 0, lock_timeout_ms, false);
    if (any_owner) o.flags |= TENSO_SHM_ANY_OWNER;
    tenso_cache *h = nullptr;
    check(nogil([&] { return tenso_cache_open(&h, name.c_str(), &o); }));
    return std::make_unique<Cache>(h);
}

uint64_t cache_put(const Cache &self, const py::str &key, const Value &value, double ttl, bool check_integrity,
                   bool compress, int64_t alignment) {
    const std::string_view k = key_bytes(key);
    if (!(ttl >= 0)) raise_value_error("ttl must be a non-negative number of seconds");
    const tenso_encode_options o = make_options(check_integrity, compress, alignment);
    const auto held = self.lease();
    tenso_cache *h = held.get();
    uint64_t written = 0;
    check(nogil([&] { return tenso_cache_put(&written, h, k.data(), k.size(), value.get(), &o, ttl); }));
    return written;
}

// The decoded entry (pinned until its arrays are collected), or None on a miss.
py::object cache_get(const Cache &self, const py::str &key, bool copy) {
    const std::string_view k = key_bytes(key);
    const auto held = self.lease();
    tenso_cache *h = held.get();
    tenso_view *v = nullptr;
    const tenso_status st = nogil([&] { return tenso_cache_get(&v, h, k.data(), k.size(), nullptr); });
    if (st == TENSO_E_NOT_FOUND) return py::none();
    check(st);
    return view_to_python(v, copy);
}

bool cache_delete(const Cache &self, const py::str &key) {
    const std::string_view k = key_bytes(key);
    const auto held = self.lease();
    tenso_cache *h = held.get();
    const tenso_status st = nogil([&] { return tenso_cache_delete(h, k.data(), k.size()); });
    if (st == TENSO_E_NOT_FOUND) return false;
    check(st);
    return true;
}

// The packet header fields (as inspect()) plus the entry's own; None when absent.
py::object cache_info(const Cache &self, const py::str &key) {
    const std::string_view k = key_bytes(key);
    const auto held = self.lease();
    tenso_cache *h = held.get();
    tenso_cache_entry_info info{};
    const tenso_status st = nogil([&] { return tenso_cache_info(&info, h, k.data(), k.size()); });
    if (st == TENSO_E_NOT_FOUND) return py::none();
    check(st);
    py::dict d = packet_info_dict(info.packet);
    d["alloc_bytes"] = info.alloc_bytes;
    d["ttl_seconds"] = info.ttl_seconds;
    d["age_seconds"] = info.age_seconds;
    d["pins"] = info.pins;
    return std::move(d);
}

bool cache_contains(const Cache &self, const py::str &key) {
    Py_ssize_t len = 0;
    const char *utf8 = PyUnicode_AsUTF8AndSize(key.ptr(), &len);
    if (!utf8) throw py::error_already_set();
    // A key no put could have stored is simply absent (dict semantics), not an error.
    if (len == 0 || len > TENSO_CACHE_MAX_KEY_BYTES) return false;
    const auto held = self.lease();
    tenso_cache *h = held.get();
    int found = 0;
    check(nogil([&] { return tenso_cache_contains(&found, h, utf8, size_t(len)); }));
    return found != 0;
}

int collect_key(const char *key, size_t key_len, void *user) {
    // Runs without the GIL: only C++ here; the strings become Python objects afterwards.
    try {
        static_cast<std::vector<std::string> *>(user)->emplace_back(key, key_len);
        return 0;
    } catch (...) {
        return 1;  // out of memory: stop the walk (TENSO_E_USER), reported below
    }
}

py::list cache_keys(const Cache &self) {
    const auto held = self.lease();
    tenso_cache *h = held.get();
    std::vector<std::string> keys;
    const tenso_status st = nogil([&] { return tenso_cache_keys(h, &collect_key, &keys); });
    if (st == TENSO_E_USER) raise_error(TENSO_E_NO_MEMORY, "out of memory while listing the cache's keys");
    check(st);
    py::list out;
    for (const std::string &k : keys) {
        py::object s =
            py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(k.data(), Py_ssize_t(k.size()), "replace"));
        if (!s) throw py::error_already_set();
        out.append(s);
    }
    return out;
}

py::dict cache_stats(const Cache &self) {
    const auto held = self.lease();
    tenso_cache *h = held.get();
    tenso_cache_stats s{};
    check(nogil([&] { return tenso_cache_stats_get(&s, h); }));
    py::dict d;
    d["entries"] = s.entries;
    d["max_entries"] = s.max_entries;
    d["pool_bytes"] = s.pool_bytes;
    d["data_bytes"] = s.data_bytes;
    d["used_bytes"] = s.used_bytes;
    d["free_bytes"] = s.free_bytes;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["evictions"] = s.evictions;
    d["expirations"] = s.expirations;
    d["pinned_entries"] = s.pinned_entries;
    d["recoveries"] = s.recoveries;
    d["clients"] = s.clients;
    return d;
}

}  // namespace

void init_shm(py::module_ &m) {
    py::class_<Shm> shm(m, "Shm",
                        "A mapping of one shared-memory segment (tenso_shm). Exports the segment's bytes "
                        "through the buffer protocol, read-only unless created or opened writable. close() "
                        "raises BufferError while an export (memoryview, np.frombuffer) is alive, as "
                        "mmap.close() does; arrays from get() keep the mapping themselves and stay valid.");
    shm.def_static("create", &shm_create, py::arg("name"), py::arg("size"), py::arg("replace") = false)
        .def_static("open", &shm_open, py::arg("name"), py::arg("writable") = true, py::arg("any_owner") = false)
        .def_static("create_for", &shm_create_for, py::arg("name"), py::arg("value"),
                    py::arg("check_integrity") = false, py::arg("compress") = false, py::arg("alignment") = 64,
                    py::arg("replace") = false)
        .def_static(
            "unlink", [](const std::string &name) { check(tenso_shm_unlink(name.c_str())); }, py::arg("name"))
        .def("put", &shm_put, py::arg("value"), py::arg("check_integrity") = false, py::arg("compress") = false,
             py::arg("alignment") = 64)
        .def("get", &shm_get, py::arg("copy") = false)
        .def_property_readonly("name", [](const Shm &s) { return std::string(tenso_shm_name(s.get())); })
        .def_property_readonly("size", [](const Shm &s) { return tenso_shm_size(s.get()); })
        .def_property_readonly("closed", &Shm::closed)
        .def("close", &shm_close,
             "Unmaps (views from get() keep the mapping until they go). BufferError while a buffer "
             "export is alive.");
    // Installed after the type is ready, so Python 3.12's __buffer__ wrappers do not exist to
    // bypass the count; the slots are read at each export.
    auto *heap = reinterpret_cast<PyHeapTypeObject *>(shm.ptr());
    heap->as_buffer.bf_getbuffer = &shm_getbuffer;
    heap->as_buffer.bf_releasebuffer = &shm_releasebuffer;
    heap->ht_type.tp_as_buffer = &heap->as_buffer;

    py::class_<Cache>(m, "Cache", "An attached tensor cache pool (tenso_cache).")
        .def_static("create", &cache_create, py::arg("name"), py::arg("size") = 0, py::arg("max_entries") = 0,
                    py::arg("max_clients") = 0, py::arg("max_pins") = 0, py::arg("lock_timeout_ms") = 0,
                    py::arg("replace") = false)
        .def_static("open", &cache_open, py::arg("name"), py::arg("lock_timeout_ms") = 0, py::arg("any_owner") = false)
        .def_static(
            "unlink", [](const std::string &name) { check(tenso_cache_unlink(name.c_str())); }, py::arg("name"))
        .def_property_readonly("name", [](const Cache &c) { return std::string(tenso_cache_name(c.get())); })
        .def("put", &cache_put, py::arg("key"), py::arg("value"), py::arg("ttl") = 0.0,
             py::arg("check_integrity") = false, py::arg("compress") = false, py::arg("alignment") = 64)
        .def("get", &cache_get, py::arg("key"), py::arg("copy") = false)
        .def("delete", &cache_delete, py::arg("key"))
        .def("info", &cache_info, py::arg("key"))
        .def("contains", &cache_contains, py::arg("key"))
        .def("keys", &cache_keys)
        .def("clear",
             [](const Cache &c) {
                 const auto held = c.lease();
                 tenso_cache *h = held.get();
                 check(nogil([&] { return tenso_cache_clear(h); }));
             })
        .def("stats", &cache_stats)
        .def("check",
             [](const Cache &c) {
                 const auto held = c.lease();
                 tenso_cache *h = held.get();
                 check(nogil([&] { return tenso_cache_check(h); }));
             })
        .def("close", &Cache::close);
}

}  // namespace tpy
