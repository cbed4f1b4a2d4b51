// GoldenTest.cpp - every packet the pinned upstream tenso 0.24.0 wrote (tests/vectors) against
// libtenso's public C API.
//
// For each manifest case two tests are generated:
//   GoldenTest::decode::<case>    tenso_loads/tenso_inspect/tenso_packet_length on the golden
//                                 file: kind, dtype, shape, flags, alignment and the exact body
//                                 bytes, recursively through bundles (keys in wire order) and
//                                 through the accessors of the composite kinds (sparse
//                                 components, quantization parameters and dequantized values,
//                                 strings, ragged rows, GPU IPC references).
//   GoldenTest::reencode::<case>  the same value built with the C API (tenso_value_*) and
//                                 encoded by every encoder entry point must give the golden
//                                 bytes exactly; compressed packets (whose bytes depend on the
//                                 LZ4 encoder) must decode back to the value; legacy v1-v3 cases
//                                 must give the v4 layout of the same value. Quantized values are
//                                 also quantized from upstream's float input (bit-exact).
// With TENSO_GOLDEN_OUT set, every re-encoded packet is written there as <case>.tenso, for
// tests/upstream/decode_ours.py to judge with upstream itself (CTest golden.upstream_interop).
#include <cppunit/TestCaller.h>
#include <cppunit/TestSuite.h>
#include <cppunit/extensions/HelperMacros.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include "check.hpp"
#include "tenso/tenso.h"

namespace {

using json = nlohmann::json;
using Bytes = std::vector<uint8_t>;

const std::string kVectors = TENSO_VECTORS_DIR;

// ---- files, hex, manifest ----

Bytes read_bytes(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

Bytes from_hex(const std::string &hex) {
    if (hex.size() % 2) throw std::runtime_error("odd-length hex string in the manifest");
    Bytes out(hex.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
    return out;
}

std::string to_hex(const uint8_t *p, size_t n) {
    static const char kDigits[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += kDigits[p[i] >> 4];
        s += kDigits[p[i] & 15];
    }
    return s;
}

// The manifest, parsed once. Throws with a readable message when it cannot be read.
const json &manifest() {
    static const json m = [] {
        std::ifstream f(kVectors + "/manifest.json");
        if (!f) throw std::runtime_error("cannot open " + kVectors + "/manifest.json");
        return json::parse(f);
    }();
    return m;
}

const json &case_at(size_t i) { return manifest().at("cases").at(i); }

// "" when the bytes are equal; otherwise where they first differ, with both sides around it.
std::string diff_bytes(const Bytes &ours, const Bytes &want) {
    size_t n = std::min(ours.size(), want.size()), at = 0;
    while (at < n && ours[at] == want[at]) ++at;
    if (at == n && ours.size() == want.size()) return "";
    size_t from = at >= 8 ? at - 8 : 0;
    auto window = [&](const Bytes &b) {
        size_t end = std::min(b.size(), at + 16);
        return from < end ? to_hex(b.data() + from, end - from) : std::string("(end)");
    };
    std::ostringstream s;
    s << "bytes differ at offset " << at << " (ours " << ours.size() << " B, expected " << want.size()
      << " B); from offset " << from << ": ours " << window(ours) << ", expected " << window(want);
    return s.str();
}

void require(bool ok, const std::string &where, const std::string &what) {
    if (!ok) CPPUNIT_FAIL(where + ": " + what);
}

template <typename A, typename B>
void require_eq(const A &got, const B &want, const std::string &where, const std::string &what) {
    if (got == want) return;
    std::ostringstream s;
    s << what << " is " << got << ", expected " << want;
    CPPUNIT_FAIL(where + ": " + s.str());
}

void require_status(tenso_status got, tenso_status want, const std::string &where, const std::string &call) {
    if (got == want) return;
    CPPUNIT_FAIL(where + ": " + call + " -> " + tenso_describe(got) + ", expected " + tenso_status_name(want));
}

// ---- what the manifest promises about each packet ----

// Options a packet was written with (legacy packets: what their header means).
struct Opts {
    uint32_t alignment = TENSO_DEFAULT_ALIGNMENT;
    bool integrity = false;
    bool compress = false;
    uint32_t version = 4;
};

Opts case_opts(const json &c) {
    Opts o;
    o.alignment = c.at("options").at("alignment").get<uint32_t>();
    o.integrity = c.at("options").at("check_integrity").get<bool>();
    o.compress = c.at("options").at("compress").get<bool>();
    o.version = c.at("version").get<uint32_t>();
    return o;
}

// v4 writers set ALIGNED for 64 and CUST_ALIGN for anything else (alignment 1 included);
// legacy packets without padding carry neither flag.
uint32_t align_flags(const Opts &o) {
    if (o.alignment == TENSO_DEFAULT_ALIGNMENT) return TENSO_FLAG_ALIGNED;
    if (o.version < 4 && o.alignment == 1) return 0;
    return TENSO_FLAG_CUST_ALIGN;
}

tenso_kind kind_code(const std::string &k) {
    if (k == "dense") return TENSO_KIND_DENSE;
    if (k == "bundle" || k == "ragged") return TENSO_KIND_BUNDLE;  // ragged arrays are bundles
    if (k == "sparse_coo") return TENSO_KIND_SPARSE_COO;
    if (k == "sparse_csr") return TENSO_KIND_SPARSE_CSR;
    if (k == "sparse_csc") return TENSO_KIND_SPARSE_CSC;
    if (k == "quantized") return TENSO_KIND_QUANTIZED;
    if (k == "string") return TENSO_KIND_STRING;
    if (k == "gpu_ipc_ref") return TENSO_KIND_GPU_IPC_REF;
    throw std::runtime_error("unknown VALUE kind '" + k + "' in the manifest");
}

// The header facts a VALUE implies: kind, dtype, shape, flags, alignment.
struct Expect {
    tenso_kind kind = 0;
    tenso_dtype dtype = 0;
    std::vector<uint64_t> shape;
    uint32_t flags = 0;
    uint32_t alignment = 1;  // containers and IPC refs have no padding
    uint32_t entries = 0;
};

tenso_dtype dtype_code(const std::string &name) {
    tenso_dtype d = 0;
    if (tenso_dtype_from_name(&d, name.c_str()) != TENSO_OK)
        throw std::runtime_error("tenso_dtype_from_name does not know '" + name + "'");
    return d;
}

Expect expect_of(const json &v, const Opts &o) {
    Expect e;
    const std::string k = v.at("kind").get<std::string>();
    e.kind = kind_code(k);
    if (v.contains("shape")) e.shape = v.at("shape").get<std::vector<uint64_t>>();
    const uint32_t integrity = o.integrity ? TENSO_FLAG_INTEGRITY : 0;
    if (k == "dense") {
        e.dtype = dtype_code(v.at("dtype").get<std::string>());
        e.flags = align_flags(o) | integrity | (o.compress ? TENSO_FLAG_COMPRESSION : 0);
        e.alignment = o.alignment;
    } else if (k == "bundle" || k == "ragged") {
        e.flags = TENSO_FLAG_BUNDLE;
        e.entries = uint32_t((k == "bundle" ? v : v.at("bundle")).at("entries").size());
    } else if (k == "sparse_coo") {
        e.flags = TENSO_FLAG_SPARSE_COO;
    } else if (k == "sparse_csr") {
        e.flags = TENSO_FLAG_SPARSE_CSR;
    } else if (k == "sparse_csc") {
        e.flags = TENSO_FLAG_SPARSE_CSC;
    } else if (k == "quantized") {
        e.dtype = dtype_code(v.at("dtype").get<std::string>());
        e.flags = align_flags(o) | integrity;  // compress is ignored for quantized packets
        e.alignment = o.alignment;
    } else if (k == "string") {
        e.dtype = TENSO_DTYPE_STRING;
        e.flags = TENSO_FLAG_STRING | TENSO_FLAG_ALIGNED | integrity;  // always 64-aligned
        e.alignment = TENSO_DEFAULT_ALIGNMENT;
    } else if (k == "gpu_ipc_ref") {
        e.flags = TENSO_FLAG_GPU_IPC_REF;
    }
    return e;
}

// Sparse components are always written with alignment 64, no integrity and no compression,
// whatever the caller asked (reference §2.2; case sparse_coo_options_ignored).
Opts component_opts(const Opts &outer) {
    Opts o;
    o.version = outer.version;
    return o;
}

int32_t scheme_code(const std::string &s) {
    if (s == "per_tensor") return TENSO_QUANT_PER_TENSOR;
    if (s == "per_channel") return TENSO_QUANT_PER_CHANNEL;
    if (s == "per_group") return TENSO_QUANT_PER_GROUP;
    throw std::runtime_error("unknown quantization scheme '" + s + "' in the manifest");
}

uint64_t numel(const std::vector<uint64_t> &shape) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
}

// ---- checking decoded views ----

void check_shape(const tenso_view *v, const Expect &e, const std::string &where) {
    require_eq(tenso_view_ndim(v), e.shape.size(), where, "tenso_view_ndim");
    const uint64_t *shape = tenso_view_shape(v);
    if (e.shape.empty()) {
        require(shape == nullptr, where, "tenso_view_shape of a 0-d value is not NULL");
        return;
    }
    require(shape != nullptr, where, "tenso_view_shape is NULL");
    for (size_t i = 0; i < e.shape.size(); ++i)
        require_eq(shape[i], e.shape[i], where, "shape[" + std::to_string(i) + "]");
}

Bytes bytes_at(const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    return n ? Bytes(b, b + n) : Bytes();
}

void require_bytes(const void *p, size_t n, const std::string &want_hex, const std::string &where,
                   const std::string &what) {
    const Bytes want = from_hex(want_hex);
    require_eq(n, want.size(), where, what + " length");
    if (n) require(p != nullptr, where, what + " is NULL");
    const std::string d = diff_bytes(bytes_at(p, n), want);
    require(d.empty(), where, what + ": " + d);
}

// Every part of a quantized tensor against the VALUE, and dequantization bit for bit against
// upstream's dequantize().
void check_quantized_parts(const tenso_quantized &q, const json &val, const std::string &where) {
    const auto shape = val.at("shape").get<std::vector<uint64_t>>();
    require_eq(q.dtype, dtype_code(val.at("dtype").get<std::string>()), where, "quantized dtype");
    require_eq(q.scheme, scheme_code(val.at("scheme").get<std::string>()), where, "quantized scheme");
    require_eq(q.axis, val.at("axis").get<int32_t>(), where, "quantized axis");
    require_eq(q.group_size, val.at("group_size").get<uint32_t>(), where, "quantized group_size");
    require_eq(q.ndim, shape.size(), where, "quantized ndim");
    for (size_t i = 0; i < shape.size(); ++i)
        require_eq(q.shape[i], shape[i], where, "quantized shape[" + std::to_string(i) + "]");
    const size_t num_scales = val.at("scales_hex").get<std::string>().size() / 8;
    require_eq(q.num_scales, num_scales, where, "num_scales");
    require_bytes(q.scales, 4 * size_t(q.num_scales), val.at("scales_hex").get<std::string>(), where, "scales");
    require_bytes(q.zero_points, 4 * size_t(q.num_scales), val.at("zero_points_hex").get<std::string>(), where,
                  "zero_points");
    require_bytes(q.data, q.nbytes, val.at("body_hex").get<std::string>(), where, "packed data");
    std::vector<float> deq(numel(shape));
    require_status(tenso_dequantize(deq.data(), deq.size(), &q), TENSO_OK, where, "tenso_dequantize");
    require_bytes(deq.data(), 4 * deq.size(), val.at("dequant_hex").get<std::string>(), where,
                  "tenso_dequantize (vs upstream dequantize())");
}

void check_quantized_view(const tenso_view *v, const json &val, const std::string &where) {
    tenso_quantized q;
    require_status(tenso_view_quantized(&q, v), TENSO_OK, where, "tenso_view_quantized");
    check_quantized_parts(q, val, where);
}

void check_strings_view(const tenso_view *v, const json &val, const std::string &where) {
    const auto strings = val.at("strings").get<std::vector<std::string>>();
    const uint64_t *offs = nullptr;
    const char *payload = nullptr;
    require_status(tenso_view_string_offsets(&offs, &payload, v), TENSO_OK, where, "tenso_view_string_offsets");
    require(offs != nullptr, where, "string offsets are NULL");
    require_eq(offs[0], 0u, where, "offsets[0]");
    for (size_t i = 0; i < strings.size(); ++i) {
        require(offs[i + 1] >= offs[i], where, "offsets decrease at " + std::to_string(i + 1));
        const std::string got(payload ? payload + offs[i] : "", size_t(offs[i + 1] - offs[i]));
        require_eq(got, strings[i], where, "string " + std::to_string(i));
    }
}

// The rows of a ragged bundle, read back through tenso_view_ragged.
void check_ragged_view(const tenso_view *v, const json &val, const std::string &where) {
    const tenso_view *flat = nullptr, *offs = nullptr;
    require_status(tenso_view_ragged(&flat, &offs, v), TENSO_OK, where, "tenso_view_ragged");
    require_eq(tenso_view_dtype(flat), dtype_code(val.at("dtype").get<std::string>()), where, "ragged flat dtype");
    const auto lengths = val.at("row_lengths").get<std::vector<uint64_t>>();
    const auto rows = val.at("rows_hex").get<std::vector<std::string>>();
    require_eq(tenso_view_dtype(offs), TENSO_DTYPE_UINT64, where, "ragged offsets dtype");
    require_eq(tenso_view_nbytes(offs), 8 * (lengths.size() + 1), where, "ragged offsets nbytes");
    const Bytes ob = bytes_at(tenso_view_data(offs), size_t(tenso_view_nbytes(offs)));
    auto offset = [&](size_t i) {
        uint64_t x = 0;
        for (int b = 7; b >= 0; --b) x = x << 8 | ob[8 * i + size_t(b)];
        return x;
    };
    const size_t item = tenso_dtype_itemsize(tenso_view_dtype(flat));
    const uint8_t *fp = static_cast<const uint8_t *>(tenso_view_data(flat));
    for (size_t i = 0; i < lengths.size(); ++i) {
        const std::string at = where + " row " + std::to_string(i);
        require_eq(offset(i + 1) - offset(i), lengths[i], at, "row length");
        require_bytes(lengths[i] ? fp + offset(i) * item : nullptr, size_t(lengths[i]) * item, rows[i], at, "row");
    }
}

// Checks view `v` against VALUE `val` written with options `o`, recursively.
void check_view(const tenso_view *v, const json &val, const Opts &o, const std::string &where) {
    require(v != nullptr, where, "view is NULL");
    const Expect e = expect_of(val, o);
    const std::string k = val.at("kind").get<std::string>();
    require_eq(tenso_view_kind(v), e.kind, where, "tenso_view_kind");
    require_eq(tenso_view_version(v), o.version, where, "tenso_view_version");
    require_eq(tenso_view_flags(v), e.flags, where, "tenso_view_flags");
    require_eq(tenso_view_dtype(v), e.dtype, where, "tenso_view_dtype");
    if (k != "bundle" && k != "ragged") check_shape(v, e, where);

    if (k == "dense") {
        require_eq(tenso_view_alignment(v), e.alignment, where, "tenso_view_alignment");
        const Bytes body = from_hex(val.at("body_hex").get<std::string>());
        require_eq(tenso_view_nbytes(v), body.size(), where, "tenso_view_nbytes");
        const void *data = tenso_view_data(v);
        if (body.empty()) {
            require(data == nullptr, where, "tenso_view_data of an empty tensor is not NULL");
        } else {
            require(data != nullptr, where, "tenso_view_data is NULL");
            Bytes got(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + body.size());
            std::string d = diff_bytes(got, body);
            require(d.empty(), where, "body: " + d);
        }
        // Compressed bodies are decompressed into memory the view owns.
        if (o.compress) require_eq(tenso_view_owns_data(v), 1, where, "tenso_view_owns_data (LZ4 body)");
        return;
    }
    if (k == "bundle" || k == "ragged") {
        const json &entries = (k == "bundle" ? val : val.at("bundle")).at("entries");
        require_eq(tenso_view_ndim(v), 0u, where, "tenso_view_ndim of a bundle");
        require_eq(tenso_view_bundle_count(v), entries.size(), where, "tenso_view_bundle_count");
        require_eq(tenso_view_alignment(v), e.alignment, where, "tenso_view_alignment");
        for (uint32_t i = 0; i < entries.size(); ++i) {
            const std::string key = entries[i].at("key").get<std::string>();
            const std::string at = where + "['" + key + "']";
            const char *kp = nullptr;
            size_t klen = 0;
            const tenso_view *child = nullptr;
            tenso_status st = tenso_view_bundle_entry(&kp, &klen, &child, v, i);
            require_status(st, TENSO_OK, at, "tenso_view_bundle_entry(" + std::to_string(i) + ")");
            require(std::string(kp ? kp : "", klen) == key, at,
                    "key is '" + std::string(kp ? kp : "", klen) + "' (entry " + std::to_string(i) + ")");
            // find returns the FIRST entry with that key.
            uint32_t first = 0;
            while (entries[first].at("key").get<std::string>() != key) ++first;
            const tenso_view *found = nullptr;
            require_status(tenso_view_bundle_find(&found, v, key.data(), key.size()), TENSO_OK, at,
                           "tenso_view_bundle_find");
            const tenso_view *want_found = nullptr;
            tenso_view_bundle_entry(&kp, &klen, &want_found, v, first);
            require(found == want_found, at, "tenso_view_bundle_find returned another entry");
            check_view(child, entries[i].at("value"), o, at);
        }
        if (k == "ragged") check_ragged_view(v, val, where);
        return;
    }
    require_eq(tenso_view_alignment(v), e.alignment, where, "tenso_view_alignment");
    if (k == "sparse_coo" || k == "sparse_csr" || k == "sparse_csc") {
        const json &comps = val.at("components");
        for (uint32_t i = 0; i < 3; ++i) {
            const tenso_view *comp = nullptr;
            require_status(tenso_view_component(&comp, v, i), TENSO_OK, where,
                           "tenso_view_component(" + std::to_string(i) + ")");
            check_view(comp, comps.at(i), component_opts(o), where + ".component" + std::to_string(i));
        }
        const tenso_view *none = nullptr;
        require_status(tenso_view_component(&none, v, 3), TENSO_E_INVALID_ARGUMENT, where, "tenso_view_component(3)");
    } else if (k == "quantized") {
        check_quantized_view(v, val, where);
    } else if (k == "string") {
        check_strings_view(v, val, where);
    } else if (k == "gpu_ipc_ref") {
        tenso_ipc_ref ref;
        require_status(tenso_view_ipc_ref(&ref, v), TENSO_OK, where, "tenso_view_ipc_ref");
        require_eq(to_hex(ref.handle, sizeof ref.handle), val.at("handle_hex").get<std::string>(), where, "handle");
        require_eq(ref.byte_offset, val.at("byte_offset").get<uint64_t>(), where, "byte_offset");
        require_eq(ref.nbytes, val.at("nbytes").get<uint64_t>(), where, "nbytes");
        require_eq(to_hex(ref.device_uuid, sizeof ref.device_uuid), val.at("uuid_hex").get<std::string>(), where,
                   "device_uuid");
    }
}

// tenso_inspect's view of a whole golden packet (header only: no bodies are read).
void check_inspect(const Bytes &pkt, const json &val, const Opts &o, const std::string &where) {
    const Expect e = expect_of(val, o);
    tenso_packet_info info;
    std::memset(&info, 0xAB, sizeof info);  // every field must be written
    require_status(tenso_inspect(&info, pkt.data(), pkt.size()), TENSO_OK, where, "tenso_inspect");
    require_eq(info.version, o.version, where, "info.version");
    require_eq(info.kind, e.kind, where, "info.kind");
    require_eq(info.dtype, e.dtype, where, "info.dtype");
    require_eq(info.flags, e.flags, where, "info.flags");
    require_eq(info.alignment, e.alignment, where, "info.alignment");
    require_eq(info.entry_count, e.entries, where, "info.entry_count");
    require_eq(info.ndim, e.shape.size(), where, "info.ndim");
    for (size_t i = 0; i < e.shape.size(); ++i)
        require_eq(info.shape[i], e.shape[i], where, "info.shape[" + std::to_string(i) + "]");
    require_eq(info.packet_size, pkt.size(), where, "info.packet_size");
    if (val.at("kind") == "dense") {
        const size_t nbytes = val.at("body_hex").get<std::string>().size() / 2;
        const size_t footer = o.integrity ? 8 : 0;
        require(info.body_offset % e.alignment == 0, where,
                "info.body_offset " + std::to_string(info.body_offset) + " is not aligned");
        // The body ends where the footer (if any) starts, which is the end of the packet.
        require_eq(info.body_offset + info.body_size + footer, pkt.size(), where,
                   "info.body_offset + info.body_size + footer");
        if (!o.compress) require_eq(info.body_size, nbytes, where, "info.body_size");
    }
}

// tenso_packet_length: exact on the packet alone, with slack after it, and too short.
void check_framing(const Bytes &pkt, const std::string &where) {
    size_t n = 0;
    require_status(tenso_packet_length(&n, pkt.data(), pkt.size(), nullptr), TENSO_OK, where, "tenso_packet_length");
    require_eq(n, pkt.size(), where, "tenso_packet_length");
    Bytes slack(pkt);
    slack.resize(pkt.size() + 100, 0xEE);
    n = 0;
    require_status(tenso_packet_length(&n, slack.data(), slack.size(), nullptr), TENSO_OK, where,
                   "tenso_packet_length (100 bytes of slack)");
    require_eq(n, pkt.size(), where, "tenso_packet_length with slack");
    n = 0;
    require_status(tenso_packet_length(&n, pkt.data(), pkt.size() - 1, nullptr), TENSO_E_TRUNCATED, where,
                   "tenso_packet_length (one byte short)");
    require(n > pkt.size() - 1 && n <= pkt.size(), where,
            "TRUNCATED asks for " + std::to_string(n) + " bytes, not within (len, packet size]");
}

// Decodes the packet at the start of `pkt` (`size` bytes; the rest is slack) and checks it
// against `val`.
void check_decode(const Bytes &pkt, size_t size, const json &val, const Opts &o, const std::string &where) {
    tenso_view *raw = nullptr;
    tenso_status st = tenso_loads(&raw, pkt.data(), pkt.size(), nullptr);
    std::unique_ptr<tenso_view, decltype(&tenso_view_free)> view(raw, tenso_view_free);
    require_status(st, TENSO_OK, where, "tenso_loads");
    require_eq(tenso_view_packet_size(raw), size, where, "tenso_view_packet_size");
    check_view(raw, val, o, where);
    if (val.at("kind") == "dense" && !o.compress && !pkt.empty()) {
        // Zero copy: an uncompressed body is a pointer into the caller's bytes, where inspect
        // says the body is.
        tenso_packet_info info;
        TENSO_CHECK_OK(tenso_inspect(&info, pkt.data(), pkt.size()));
        require_eq(tenso_view_owns_data(raw), 0, where, "tenso_view_owns_data");
        if (info.body_size)
            require(tenso_view_data(raw) == pkt.data() + info.body_offset, where,
                    "tenso_view_data does not point at the body inside the packet");
    }
}

// ---- encoding ----

// Owns the tensor bodies a value borrows.
struct Arena {
    std::deque<Bytes> bodies;
    std::deque<std::vector<uint64_t>> shapes;
    std::deque<std::vector<uint64_t>> offsets;
    std::deque<std::vector<float>> floats;
};

struct ValueFree {
    void operator()(tenso_value *v) const { tenso_value_free(v); }
};
using ValuePtr = std::unique_ptr<tenso_value, ValueFree>;

struct BufferGuard {
    tenso_buffer b = TENSO_BUFFER_INIT;
    ~BufferGuard() { tenso_buffer_dispose(&b); }
    Bytes bytes() const { return Bytes(b.data, b.data + b.size); }
};

tenso_tensor tensor_of(const json &val, Arena &arena) {
    arena.bodies.push_back(from_hex(val.at("body_hex").get<std::string>()));
    arena.shapes.push_back(val.at("shape").get<std::vector<uint64_t>>());
    tenso_tensor t;
    t.data = arena.bodies.back().empty() ? nullptr : arena.bodies.back().data();
    t.nbytes = arena.bodies.back().size();
    t.shape = arena.shapes.back().empty() ? nullptr : arena.shapes.back().data();
    t.ndim = uint32_t(arena.shapes.back().size());
    t.dtype = dtype_code(val.at("dtype").get<std::string>());
    return t;
}

// The parts of a quantized VALUE as a tenso_quantized (buffers kept in `arena`).
tenso_quantized quantized_of(const json &val, Arena &arena) {
    arena.bodies.push_back(from_hex(val.at("body_hex").get<std::string>()));
    const Bytes &data = arena.bodies.back();
    arena.bodies.push_back(from_hex(val.at("scales_hex").get<std::string>()));
    const Bytes &scales = arena.bodies.back();
    arena.bodies.push_back(from_hex(val.at("zero_points_hex").get<std::string>()));
    const Bytes &zps = arena.bodies.back();
    arena.floats.emplace_back(scales.size() / 4);
    std::memcpy(arena.floats.back().data(), scales.data(), scales.size());
    const float *sp = arena.floats.back().data();
    arena.floats.emplace_back(zps.size() / 4);
    std::memcpy(arena.floats.back().data(), zps.data(), zps.size());
    const float *zp = arena.floats.back().data();
    arena.shapes.push_back(val.at("shape").get<std::vector<uint64_t>>());
    tenso_quantized q;
    q.data = data.data();
    q.nbytes = data.size();
    q.shape = arena.shapes.back().empty() ? nullptr : arena.shapes.back().data();
    q.scales = sp;
    q.zero_points = zp;
    q.ndim = uint32_t(arena.shapes.back().size());
    q.dtype = dtype_code(val.at("dtype").get<std::string>());
    q.scheme = scheme_code(val.at("scheme").get<std::string>());
    q.axis = val.at("axis").get<int32_t>();
    q.group_size = val.at("group_size").get<uint32_t>();
    q.num_scales = uint32_t(scales.size() / 4);
    return q;
}

// Builds the tenso_value for VALUE `val` with the C API's constructors.
ValuePtr build_value(const json &val, Arena &arena, const std::string &where) {
    const std::string k = val.at("kind").get<std::string>();
    tenso_value *raw = nullptr;
    if (k == "dense") {
        tenso_tensor t = tensor_of(val, arena);
        require_status(tenso_value_new_tensor(&raw, &t), TENSO_OK, where, "tenso_value_new_tensor");
    } else if (k == "bundle") {
        const json &entries = val.at("entries");
        require_status(tenso_value_new_bundle(&raw), TENSO_OK, where, "tenso_value_new_bundle");
        ValuePtr bundle(raw);
        for (size_t i = 0; i < entries.size(); ++i) {
            const std::string key = entries[i].at("key").get<std::string>();
            ValuePtr child = build_value(entries[i].at("value"), arena, where + "['" + key + "']");
            require_status(tenso_bundle_insert(bundle.get(), key.data(), key.size(), child.get()), TENSO_OK, where,
                           "tenso_bundle_insert('" + key + "')");
        }
        require_eq(tenso_bundle_count(bundle.get()), entries.size(), where, "tenso_bundle_count");
        return bundle;
    } else if (k == "ragged") {
        // Upstream's RaggedArray.dumps form, from the flat values and the row offsets.
        const json &entries = val.at("bundle").at("entries");
        require_eq(entries.size(), 3u, where, "ragged bundle entries");
        tenso_tensor flat = tensor_of(entries[1].at("value"), arena);
        const Bytes offs = from_hex(entries[0].at("value").at("body_hex").get<std::string>());
        arena.offsets.emplace_back(offs.size() / 8);
        std::memcpy(arena.offsets.back().data(), offs.data(), offs.size());
        const uint64_t count = arena.offsets.back().size() - 1;
        require_status(tenso_value_new_ragged(&raw, &flat, count, arena.offsets.back().data()), TENSO_OK, where,
                       "tenso_value_new_ragged");
    } else if (k == "sparse_coo" || k == "sparse_csr" || k == "sparse_csc") {
        const json &comps = val.at("components");
        tenso_tensor a = tensor_of(comps.at(0), arena), b = tensor_of(comps.at(1), arena),
                     c = tensor_of(comps.at(2), arena);
        arena.shapes.push_back(val.at("shape").get<std::vector<uint64_t>>());
        const auto &shape = arena.shapes.back();
        require_status(tenso_value_new_sparse(&raw, kind_code(k), uint32_t(shape.size()), shape.data(), &a, &b, &c),
                       TENSO_OK, where, "tenso_value_new_sparse");
    } else if (k == "quantized") {
        tenso_quantized q = quantized_of(val, arena);
        require_status(tenso_value_new_quantized(&raw, &q), TENSO_OK, where, "tenso_value_new_quantized");
    } else if (k == "string") {
        const auto strings = val.at("strings").get<std::vector<std::string>>();
        arena.offsets.emplace_back(1, 0);
        std::string payload;
        for (const std::string &str : strings) {
            payload += str;
            arena.offsets.back().push_back(payload.size());
        }
        arena.bodies.emplace_back(payload.begin(), payload.end());
        require_status(tenso_value_new_strings(&raw, strings.size(), arena.offsets.back().data(),
                                               arena.bodies.back().empty() ? nullptr : arena.bodies.back().data(),
                                               arena.bodies.back().size()),
                       TENSO_OK, where, "tenso_value_new_strings");
    } else if (k == "gpu_ipc_ref") {
        tenso_ipc_ref ref;
        const Bytes handle = from_hex(val.at("handle_hex").get<std::string>());
        const Bytes uuid = from_hex(val.at("uuid_hex").get<std::string>());
        require_eq(handle.size(), sizeof ref.handle, where, "handle_hex length");
        require_eq(uuid.size(), sizeof ref.device_uuid, where, "uuid_hex length");
        std::memcpy(ref.handle, handle.data(), sizeof ref.handle);
        std::memcpy(ref.device_uuid, uuid.data(), sizeof ref.device_uuid);
        ref.byte_offset = val.at("byte_offset").get<uint64_t>();
        ref.nbytes = val.at("nbytes").get<uint64_t>();
        require_status(tenso_value_new_ipc_ref(&raw, &ref), TENSO_OK, where, "tenso_value_new_ipc_ref");
    } else {
        CPPUNIT_FAIL(where + ": no constructor for VALUE kind " + k);
    }
    return ValuePtr(raw);
}

tenso_encode_options encode_opts(const Opts &o) {
    tenso_encode_options e = TENSO_ENCODE_OPTIONS_INIT;
    e.alignment = o.alignment;
    if (o.integrity) e.flags |= TENSO_ENCODE_INTEGRITY;
    if (o.compress) e.flags |= TENSO_ENCODE_COMPRESS;
    return e;
}

// Everything written to fd (a tmpfile) by `write`, which returns a status.
template <typename Write>
Bytes via_fd(Write write, uint64_t expect_written, const std::string &where, const std::string &call) {
    std::unique_ptr<FILE, int (*)(FILE *)> f(std::tmpfile(), std::fclose);
    require(f != nullptr, where, "tmpfile() failed");
    uint64_t written = 0;
    require_status(write(fileno(f.get()), &written), TENSO_OK, where, call);
    require_eq(written, expect_written, where, call + " written_out");
    std::rewind(f.get());
    Bytes out(size_t(written) + 1);
    size_t got = std::fread(out.data(), 1, out.size(), f.get());
    out.resize(got);
    return out;
}

// Every encoder entry point for `value` (and `tensor` when the value is one dense tensor):
// returns tenso_value_dumps' packet after checking all of them give the same bytes.
// `lz4`: the packet holds LZ4 bodies (the bound is then only an upper bound).
Bytes encode_all_ways(const tenso_value *value, const tenso_tensor *tensor, const Opts &o, bool lz4,
                      const std::string &where) {
    const tenso_encode_options eo = encode_opts(o);
    BufferGuard main;
    require_status(tenso_value_dumps(&main.b, value, &eo), TENSO_OK, where, "tenso_value_dumps");
    const Bytes pkt = main.bytes();
    require(reinterpret_cast<uintptr_t>(main.b.data) % 64 == 0, where, "tenso_buffer data is not 64-byte aligned");

    size_t bound = 0;
    require_status(tenso_value_dumps_bound(&bound, value, &eo), TENSO_OK, where, "tenso_value_dumps_bound");
    if (lz4) require(bound >= pkt.size(), where, "tenso_value_dumps_bound is below the packet size");
    else require_eq(bound, pkt.size(), where, "tenso_value_dumps_bound (exact without compression)");

    // _into: exactly `bound` bytes fit; one fewer reports the size needed.
    Bytes into(bound + 16, 0xCD);
    size_t written = 0;
    require_status(tenso_value_dumps_into(into.data(), bound, &written, value, &eo), TENSO_OK, where,
                   "tenso_value_dumps_into");
    into.resize(written);
    require(diff_bytes(into, pkt).empty(), where, "tenso_value_dumps_into: " + diff_bytes(into, pkt));
    if (bound > 0) {
        Bytes small(bound - 1);
        written = 0;
        tenso_status st = tenso_value_dumps_into(small.data(), small.size(), &written, value, &eo);
        if (!lz4) {
            require_status(st, TENSO_E_BUFFER_TOO_SMALL, where, "tenso_value_dumps_into (capacity bound-1)");
            require_eq(written, bound, where, "needed size reported by tenso_value_dumps_into");
        }
    }

    Bytes fd = via_fd([&](int f, uint64_t *w) { return tenso_value_write_fd(w, f, value, &eo); }, pkt.size(), where,
                      "tenso_value_write_fd");
    require(diff_bytes(fd, pkt).empty(), where, "tenso_value_write_fd: " + diff_bytes(fd, pkt));

    if (tensor) {
        BufferGuard t;
        require_status(tenso_dumps(&t.b, tensor, &eo), TENSO_OK, where, "tenso_dumps");
        require(diff_bytes(t.bytes(), pkt).empty(), where, "tenso_dumps: " + diff_bytes(t.bytes(), pkt));
        size_t tbound = 0;
        require_status(tenso_dumps_bound(&tbound, tensor, &eo), TENSO_OK, where, "tenso_dumps_bound");
        require_eq(tbound, bound, where, "tenso_dumps_bound");
        Bytes tinto(tbound);
        written = 0;
        require_status(tenso_dumps_into(tinto.data(), tinto.size(), &written, tensor, &eo), TENSO_OK, where,
                       "tenso_dumps_into");
        tinto.resize(written);
        require(diff_bytes(tinto, pkt).empty(), where, "tenso_dumps_into: " + diff_bytes(tinto, pkt));
        Bytes tfd = via_fd([&](int f, uint64_t *w) { return tenso_write_fd(w, f, tensor, &eo); }, pkt.size(), where,
                           "tenso_write_fd");
        require(diff_bytes(tfd, pkt).empty(), where, "tenso_write_fd: " + diff_bytes(tfd, pkt));
    }
    return pkt;
}

// The v4 layout of a dense VALUE (reference §1.2-1.9), used as the expectation for legacy cases
// re-encoded by a v4 writer. `footer` is the XXH3 footer (same body, same hash), or empty.
Bytes v4_dense_layout(const json &val, const Opts &o, const Bytes &footer) {
    Opts v4 = o;
    v4.version = 4;
    const uint32_t flags = align_flags(v4) | (o.integrity ? TENSO_FLAG_INTEGRITY : 0);
    const auto shape = val.at("shape").get<std::vector<uint64_t>>();
    Bytes p = {'T',
               'N',
               'S',
               'O',
               4,
               uint8_t(flags),
               uint8_t(flags >> 8),
               uint8_t(dtype_code(val.at("dtype").get<std::string>())),
               uint8_t(shape.size()),
               0};
    for (uint64_t d : shape)
        for (int i = 0; i < 4; ++i) p.push_back(uint8_t(d >> (8 * i)));
    if (flags & TENSO_FLAG_CUST_ALIGN) {
        uint8_t e = 0;
        while ((1u << e) < o.alignment) ++e;
        p.push_back(e);
    }
    p.resize(p.size() + (o.alignment - p.size() % o.alignment) % o.alignment, 0);
    const Bytes body = from_hex(val.at("body_hex").get<std::string>());
    p.insert(p.end(), body.begin(), body.end());
    p.insert(p.end(), footer.begin(), footer.end());
    return p;
}

void write_out(const std::string &name, const Bytes &pkt) {
    const char *dir = std::getenv("TENSO_GOLDEN_OUT");
    if (!dir || !*dir) return;
    std::filesystem::create_directories(dir);
    const std::string path = std::string(dir) + "/" + name + ".tenso";
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char *>(pkt.data()), std::streamsize(pkt.size()));
    f.close();
    require(bool(f), name, "cannot write " + path);
}

int g_stage_fd = -1;  // in an isolated() child: where stage() reports progress

// Records the step an isolated() child is at, so a crash can be pinned on it.
void stage(const std::string &what) {
    if (g_stage_fd < 0) return;
    const std::string line = "@" + what + "\n";
    if (::write(g_stage_fd, line.data(), line.size()) < 0) g_stage_fd = -1;
}

// Runs `fn` in a child process, so that an engine crash on one path fails this test with the
// signal and the last stage() reached, instead of killing the runner and every result with it.
void isolated(const std::string &where, const std::function<void()> &fn) {
    int p[2];
    require(::pipe(p) == 0, where, "pipe() failed");
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    require(pid >= 0, where, "fork() failed");
    if (pid == 0) {
        ::close(p[0]);
        g_stage_fd = p[1];
        std::string msg;
        try {
            fn();
        } catch (const std::exception &e) {  // CppUnit::Exception included
            msg = e.what();
        } catch (...) {
            msg = "unknown exception";
        }
        msg = "!" + msg;
        for (size_t done = 0; done < msg.size();) {
            const ssize_t n = ::write(p[1], msg.data() + done, msg.size() - done);
            if (n <= 0) break;
            done += size_t(n);
        }
        ::_exit(msg.size() == 1 ? 0 : 1);
    }
    ::close(p[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    ::close(p[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::string last_stage = "(none)", msg;
    bool verdict = false;
    for (size_t pos = 0; pos < out.size();) {
        if (out[pos] == '!') {
            msg = out.substr(pos + 1);
            verdict = true;
            break;
        }
        size_t nl = out.find('\n', pos);
        if (nl == std::string::npos) break;
        last_stage = out.substr(pos + 1, nl - pos - 1);
        pos = nl + 1;
    }
    if (WIFSIGNALED(status))
        CPPUNIT_FAIL(where + ": crashed with signal " + std::to_string(WTERMSIG(status)) + " (" +
                     ::strsignal(WTERMSIG(status)) + ") in " + last_stage);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        // No verdict at all: the child died some other way (a sanitizer report exits with 1).
        if (!verdict)
            CPPUNIT_FAIL(where + ": died with exit status " + std::to_string(WEXITSTATUS(status)) +
                         " and no verdict (a sanitizer report above?) in " + last_stage);
        CPPUNIT_FAIL(msg);
    }
}

}  // namespace

class GoldenTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(GoldenTest);
    CPPUNIT_TEST(testManifestMatchesFiles);
    CPPUNIT_TEST(testUncompressedDenseFollowsReferenceLayout);
    CPPUNIT_TEST(testBundleOf256EntriesIsRefused);
    CPPUNIT_TEST(testUpstreamLz4FrameIsTheBody);
    CPPUNIT_TEST(testPacketsUpstreamRefusesAreRead);
    CPPUNIT_TEST_SUITE_ADD_CUSTOM_TESTS(addCaseTests);
    CPPUNIT_TEST_SUITE_END();

public:
    GoldenTest() = default;
    explicit GoldenTest(size_t index) : index_(index) {}

    // One decode and one re-encode test per case, in two sub-suites so CTest can run the
    // re-encode half alone (golden.write_ours).
    static void addCaseTests(TestSuiteBuilderContextType &context) {
        size_t n = 0;
        try {
            n = manifest().at("cases").size();
        } catch (const std::exception &) {
            return;  // testManifestMatchesFiles reports it
        }
        auto *decode = new CppUnit::TestSuite("GoldenTest::decode");
        auto *reencode = new CppUnit::TestSuite("GoldenTest::reencode");
        for (size_t i = 0; i < n; ++i) {
            const std::string name = case_at(i).at("name").get<std::string>();
            decode->addTest(new CppUnit::TestCaller<GoldenTest>("GoldenTest::decode::" + name, &GoldenTest::checkDecode,
                                                                new GoldenTest(i)));
            reencode->addTest(new CppUnit::TestCaller<GoldenTest>("GoldenTest::reencode::" + name,
                                                                  &GoldenTest::checkReencode, new GoldenTest(i)));
        }
        context.addTest(decode);
        context.addTest(reencode);
    }

    // Every case has its file, of the size the manifest gives, with its version byte.
    void testManifestMatchesFiles() {
        const json &m = manifest();
        CPPUNIT_ASSERT_EQUAL_MESSAGE("manifest generator", std::string("0.24.0"),
                                     m.at("generator").at("tenso").get<std::string>());
        const json &cases = m.at("cases");
        CPPUNIT_ASSERT_EQUAL_MESSAGE("number of manifest cases", size_t(97), cases.size());
        std::vector<std::string> names;
        for (const json &c : cases) {
            const std::string name = c.at("name").get<std::string>();
            require(std::find(names.begin(), names.end(), name) == names.end(), name, "duplicate case name");
            names.push_back(name);
            require_eq(c.at("file").get<std::string>(), name + ".tenso", name, "file");
            const Bytes pkt = read_bytes(kVectors + "/" + c.at("file").get<std::string>());
            require_eq(pkt.size(), c.at("size").get<size_t>(), name, "file size");
            require_eq(unsigned(pkt.at(4)), c.at("version").get<unsigned>(), name, "version byte");
        }
    }

    // The golden uncompressed v4 dense packets are exactly the layout of reference §1 (which is
    // what makes v4_dense_layout a trustworthy expectation for the legacy re-encodes).
    void testUncompressedDenseFollowsReferenceLayout() {
        int checked = 0;
        for (const json &c : manifest().at("cases")) {
            const std::string name = c.at("name").get<std::string>();
            const Opts o = case_opts(c);
            if (c.at("value").at("kind") != "dense" || o.compress || o.version != 4) continue;
            const Bytes pkt = read_bytes(kVectors + "/" + name + ".tenso");
            const Bytes footer = o.integrity ? Bytes(pkt.end() - 8, pkt.end()) : Bytes();
            const std::string d = diff_bytes(pkt, v4_dense_layout(c.at("value"), o, footer));
            require(d.empty(), name, "golden file vs reference layout: " + d);
            ++checked;
        }
        CPPUNIT_ASSERT_MESSAGE("no dense cases found", checked >= 30);
    }

    // upstream_behaviour.bundle_with_256_entries: upstream raises ValueError; the count is a u8.
    void testBundleOf256EntriesIsRefused() {
        const float one = 1.0f;
        tenso_tensor t = {&one, sizeof one, nullptr, 0, TENSO_DTYPE_FLOAT32};
        tenso_value *raw = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&raw, &t));
        ValuePtr leaf(raw);
        TENSO_CHECK_OK(tenso_value_new_bundle(&raw));
        ValuePtr bundle(raw);
        for (int i = 0; i < 255; ++i) {
            const std::string key = "k" + std::to_string(i);
            TENSO_CHECK_OK(tenso_bundle_insert(bundle.get(), key.data(), key.size(), leaf.get()));
        }
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(bundle.get(), "k255", 4, leaf.get()));
        CPPUNIT_ASSERT_EQUAL(255u, tenso_bundle_count(bundle.get()));
        BufferGuard out;
        TENSO_CHECK_OK(tenso_value_dumps(&out.b, bundle.get(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint8_t(255), out.b.data[8]);
    }

    // upstream_behaviour.lz4_frame_of_dense_f64_compressed: the LZ4 frame starts right at the
    // body offset inspect reports, and runs up to the footer.
    void testUpstreamLz4FrameIsTheBody() {
        const json &frame = manifest().at("upstream_behaviour").at("lz4_frame_of_dense_f64_compressed");
        const Bytes head = from_hex(frame.at("first_16_bytes_hex").get<std::string>());
        const Bytes pkt = read_bytes(kVectors + "/dense_f64_compressed.tenso");
        tenso_packet_info info;
        TENSO_CHECK_OK(tenso_inspect(&info, pkt.data(), pkt.size()));
        CPPUNIT_ASSERT_EQUAL(uint64_t(64), info.body_offset);
        CPPUNIT_ASSERT_EQUAL(uint64_t(pkt.size() - 64 - 8), info.body_size);
        CPPUNIT_ASSERT_MESSAGE("frame header at the body offset",
                               std::equal(head.begin(), head.end(), pkt.begin() + 64));
    }

    // upstream_behaviour.loads_v1 / loads_v2 / loads_bundle_with_compressed_value: upstream
    // 0.24.0 refuses these packets, we read them (tenso.h: v1 to v3 are read; reference §2.1:
    // compressed values inside bundles work). The checks per case are in decode::<case>; this
    // pins the set, so a manifest change that drops one is noticed.
    void testPacketsUpstreamRefusesAreRead() {
        std::vector<std::string> refused;
        for (const json &c : manifest().at("cases"))
            if (!c.at("upstream_reads").get<bool>()) refused.push_back(c.at("name").get<std::string>());
        const std::vector<std::string> want = {"bundle_compressed", "legacy_v2_f32", "legacy_v1_f32", "gpu_ipc_ref"};
        CPPUNIT_ASSERT_MESSAGE("cases with upstream_reads false changed", refused == want);
        for (const std::string &name : want) {
            if (name == "gpu_ipc_ref") continue;  // no decoder required yet: decode::gpu_ipc_ref
            const Bytes pkt = read_bytes(kVectors + "/" + name + ".tenso");
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_loads(&v, pkt.data(), pkt.size(), nullptr));
            tenso_view_free(v);
        }
    }

    void checkDecode() {
        const json &c = case_at(index_);
        const std::string name = c.at("name").get<std::string>();
        const json &val = c.at("value");
        const Opts o = case_opts(c);
        const std::string path = kVectors + "/" + c.at("file").get<std::string>();
        const Bytes pkt = read_bytes(path);
        check_inspect(pkt, val, o, name + " (inspect)");
        check_framing(pkt, name);
        check_decode(pkt, pkt.size(), val, o, name);
        // Slack after a packet is ignored (compressed packets included: their LZ4 frame is
        // framed by its block headers, not by the end of the buffer).
        Bytes slack(pkt);
        slack.resize(pkt.size() + 64, 0);
        check_decode(slack, pkt.size(), val, o, name + " (+64 bytes of slack)");
        check_decode_limits(pkt, name);
        isolated(name + " (files and streams)", [&] { check_file_and_stream(path, pkt, val, o, name); });
    }

    // Decode options on a real packet: UTF-8 validation accepts upstream's strings and keys;
    // max_packet_bytes admits exactly the packet's size (what compressed bodies inflate to,
    // which it also bounds by default, is left to max_decoded_bytes here).
    static void check_decode_limits(const Bytes &pkt, const std::string &name) {
        tenso_decode_options opts = TENSO_DECODE_OPTIONS_INIT;
        opts.flags = TENSO_DECODE_VALIDATE_UTF8;
        opts.max_packet_bytes = pkt.size();
        opts.max_decoded_bytes = UINT64_MAX;
        tenso_view *v = nullptr;
        require_status(tenso_loads(&v, pkt.data(), pkt.size(), &opts), TENSO_OK, name,
                       "tenso_loads (VALIDATE_UTF8, max_packet_bytes = packet size)");
        tenso_view_free(v);
        v = nullptr;
        opts.max_packet_bytes = pkt.size() - 1;
        require_status(tenso_loads(&v, pkt.data(), pkt.size(), &opts), TENSO_E_LIMIT, name,
                       "tenso_loads (max_packet_bytes = packet size - 1)");
        require(v == nullptr, name, "a failed tenso_loads left a view behind");
    }

    // The same packet through tenso_load_file (both modes) and tenso_read_fd: a file holding
    // the packet twice gives two packets and then a clean end of stream.
    static void check_file_and_stream(const std::string &path, const Bytes &pkt, const json &val, const Opts &o,
                                      const std::string &name) {
        for (uint32_t mode : {TENSO_LOAD_READ, TENSO_LOAD_MMAP}) {
            const std::string where = name + (mode == TENSO_LOAD_READ ? " (load_file READ)" : " (load_file MMAP)");
            tenso_view *raw = nullptr;
            stage(where);
            require_status(tenso_load_file(&raw, path.c_str(), mode, nullptr), TENSO_OK, where, "tenso_load_file");
            std::unique_ptr<tenso_view, decltype(&tenso_view_free)> v(raw, tenso_view_free);
            require_eq(tenso_view_packet_size(raw), pkt.size(), where, "tenso_view_packet_size");
            check_view(raw, val, o, where);
        }
        std::unique_ptr<FILE, int (*)(FILE *)> f(std::tmpfile(), std::fclose);
        require(f != nullptr, name, "tmpfile() failed");
        for (int i = 0; i < 2; ++i)
            require(std::fwrite(pkt.data(), 1, pkt.size(), f.get()) == pkt.size(), name, "fwrite failed");
        std::fflush(f.get());
        std::rewind(f.get());
        for (int i = 0; i < 2; ++i) {
            const std::string where = name + " (read_fd, packet " + std::to_string(i + 1) + " of 2)";
            tenso_view *raw = nullptr;
            stage(where);
            require_status(tenso_read_fd(&raw, fileno(f.get()), nullptr), TENSO_OK, where, "tenso_read_fd");
            std::unique_ptr<tenso_view, decltype(&tenso_view_free)> v(raw, tenso_view_free);
            require_eq(tenso_view_packet_size(raw), pkt.size(), where, "tenso_view_packet_size");
            check_view(raw, val, o, where);
        }
        tenso_view *end = nullptr;
        stage(name + " (read_fd after the last packet)");
        require_status(tenso_read_fd(&end, fileno(f.get()), nullptr), TENSO_E_END_OF_STREAM, name,
                       "tenso_read_fd after the last packet");
    }

    void checkReencode() {
        const json &c = case_at(index_);
        const std::string name = c.at("name").get<std::string>();
        const json &val = c.at("value");
        const std::string kind = val.at("kind").get<std::string>();
        const Opts o = case_opts(c);
        const bool lz4 = c.at("compressed").get<bool>();  // o.compress is ignored by some kinds
        const Bytes golden = read_bytes(kVectors + "/" + c.at("file").get<std::string>());
        Arena arena;
        ValuePtr value = build_value(val, arena, name);
        tenso_tensor tensor;
        if (kind == "dense") tensor = tensor_of(val, arena);
        const Bytes ours = encode_all_ways(value.get(), kind == "dense" ? &tensor : nullptr, o, lz4, name);
        write_out(name, ours);  // before any verdict, so upstream judges failures too

        Opts ours_opts = o;
        ours_opts.version = 4;  // we write v4 whatever the golden version
        if (lz4) {
            // LZ4 bytes depend on the encoder: ours must decode back to the value.
            check_inspect(ours, val, ours_opts, name + " (ours, inspect)");
            check_framing(ours, name + " (ours)");
            check_decode(ours, ours.size(), val, ours_opts, name + " (ours)");
            return;
        }
        const Bytes want = o.version == 4
                               ? golden
                               : v4_dense_layout(val, o, o.integrity ? Bytes(golden.end() - 8, golden.end()) : Bytes());
        const std::string d = diff_bytes(ours, want);
        require(d.empty(), name, (o.version == 4 ? "vs golden file: " : "vs the v4 layout of the legacy value: ") + d);

        if (kind == "quantized") {
            // The value reports its parts as given, and quantizing upstream's float input
            // gives upstream's packet bit for bit.
            tenso_quantized parts;
            require_status(tenso_value_quantized(&parts, value.get()), TENSO_OK, name, "tenso_value_quantized");
            check_quantized_parts(parts, val, name + " (tenso_value_quantized)");
            require_eq(val.at("input_dtype").get<std::string>(), std::string("float32"), name, "input_dtype");
            arena.bodies.push_back(from_hex(val.at("input_hex").get<std::string>()));
            arena.shapes.push_back(val.at("shape").get<std::vector<uint64_t>>());
            const tenso_tensor input = {arena.bodies.back().data(), arena.bodies.back().size(),
                                        arena.shapes.back().empty() ? nullptr : arena.shapes.back().data(),
                                        uint32_t(arena.shapes.back().size()), TENSO_DTYPE_FLOAT32};
            tenso_value *raw = nullptr;
            require_status(tenso_quantize(&raw, &input, parts.dtype, parts.scheme, parts.axis, parts.group_size),
                           TENSO_OK, name, "tenso_quantize");
            ValuePtr quantized(raw);
            tenso_quantized qparts;
            require_status(tenso_value_quantized(&qparts, quantized.get()), TENSO_OK, name, "tenso_value_quantized");
            check_quantized_parts(qparts, val, name + " (tenso_quantize)");
            const Bytes again = encode_all_ways(quantized.get(), nullptr, o, false, name + " (tenso_quantize)");
            require(diff_bytes(again, golden).empty(), name,
                    "tenso_quantize of upstream's input vs golden file: " + diff_bytes(again, golden));
        } else if (kind == "ragged") {
            // The same bundle built entry by entry.
            ValuePtr bundle = build_value(val.at("bundle"), arena, name + " (as a bundle)");
            const Bytes again = encode_all_ways(bundle.get(), nullptr, o, false, name + " (as a bundle)");
            require(diff_bytes(again, golden).empty(), name, "ragged as a plain bundle: " + diff_bytes(again, golden));
        }
    }

private:
    size_t index_ = 0;
};

CPPUNIT_TEST_SUITE_REGISTRATION(GoldenTest);
