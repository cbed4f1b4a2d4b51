// CapiCompositeTest - sparse, quantized, string, ragged and GPU IPC reference packets against
// the golden vectors written by the pinned upstream package: our encoder must produce the same
// bytes from the same inputs (quantization included, bit for bit), our decoder must read theirs.
#include <cppunit/extensions/HelperMacros.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "check.hpp"
#include "tenso/tenso.h"

using json = nlohmann::json;
using Bytes = std::vector<uint8_t>;

namespace {

Bytes read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    CPPUNIT_ASSERT_MESSAGE("cannot open " + path, f.good());
    return Bytes(std::istreambuf_iterator<char>(f), {});
}

Bytes unhex(const std::string &h) {
    Bytes out(h.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(std::stoul(h.substr(2 * i, 2), nullptr, 16));
    return out;
}

std::vector<uint64_t> shape_of(const json &v) { return v.at("shape").get<std::vector<uint64_t>>(); }

const json &manifest() {
    static const json m = json::parse(read_file(std::string(TENSO_VECTORS_DIR) + "/manifest.json"));
    return m;
}

Bytes golden(const json &c) {
    return read_file(std::string(TENSO_VECTORS_DIR) + "/" + c.at("file").get<std::string>());
}

tenso_encode_options options_of(const json &c) {
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    const json &opt = c.at("options");
    o.alignment = opt.at("alignment").get<uint32_t>();
    if (opt.at("check_integrity").get<bool>()) o.flags |= TENSO_ENCODE_INTEGRITY;
    if (opt.at("compress").get<bool>()) o.flags |= TENSO_ENCODE_COMPRESS;
    return o;
}

struct ViewPtr {
    tenso_view *v = nullptr;
    ~ViewPtr() { tenso_view_free(v); }
};
struct ValuePtr {
    tenso_value *v = nullptr;
    ~ValuePtr() { tenso_value_free(v); }
};

Bytes dumps(const tenso_value *v, const tenso_encode_options &o) {
    tenso_buffer b = TENSO_BUFFER_INIT;
    TENSO_CHECK_OK(tenso_value_dumps(&b, v, &o));
    Bytes out(b.data, b.data + b.size);
    tenso_buffer_dispose(&b);
    return out;
}

// A dense manifest value as a tensor description (the Bytes must outlive it).
tenso_tensor tensor_of(const json &v, Bytes &body, std::vector<uint64_t> &shape) {
    body = unhex(v.at("body_hex").get<std::string>());
    shape = shape_of(v);
    tenso_dtype d = 0;
    TENSO_CHECK_OK(tenso_dtype_from_name(&d, v.at("dtype").get<std::string>().c_str()));
    return tenso_tensor{body.data(), body.size(), shape.data(), uint32_t(shape.size()), d};
}

void assert_dense_equals(const tenso_view *v, const json &want, const std::string &what) {
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what + ": kind", TENSO_KIND_DENSE, tenso_view_kind(v));
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what + ": dtype", want.at("dtype").get<std::string>(),
                                 std::string(tenso_dtype_name(tenso_view_dtype(v))));
    std::vector<uint64_t> shape = shape_of(want);
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what + ": ndim", uint32_t(shape.size()), tenso_view_ndim(v));
    for (size_t i = 0; i < shape.size(); ++i) CPPUNIT_ASSERT_EQUAL(shape[i], tenso_view_shape(v)[i]);
    Bytes body = unhex(want.at("body_hex").get<std::string>());
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what + ": nbytes", uint64_t(body.size()), tenso_view_nbytes(v));
    CPPUNIT_ASSERT_MESSAGE(what + ": body",
                           body.empty() || std::memcmp(tenso_view_data(v), body.data(), body.size()) == 0);
}

template <class F>
void for_cases(const std::string &kind, F f) {
    int n = 0;
    for (const json &c : manifest().at("cases"))
        if (c.at("value").at("kind").get<std::string>().rfind(kind, 0) == 0) {
            f(c);
            ++n;
        }
    CPPUNIT_ASSERT_MESSAGE("no golden cases of kind " + kind, n > 0);
}

tenso_kind sparse_kind(const std::string &k) {
    return k == "sparse_coo"   ? TENSO_KIND_SPARSE_COO
           : k == "sparse_csr" ? TENSO_KIND_SPARSE_CSR
                               : TENSO_KIND_SPARSE_CSC;
}

int scheme_of(const std::string &s) {
    return s == "per_tensor"    ? TENSO_QUANT_PER_TENSOR
           : s == "per_channel" ? TENSO_QUANT_PER_CHANNEL
                                : TENSO_QUANT_PER_GROUP;
}

}  // namespace

class CapiCompositeTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiCompositeTest);
    CPPUNIT_TEST(sparseGolden);
    CPPUNIT_TEST(sparseRejectsBadStructure);
    CPPUNIT_TEST(quantizedGolden);
    CPPUNIT_TEST(quantizeNegativeAxisIsNormalised);
    CPPUNIT_TEST(quantizeHalfInputs);
    CPPUNIT_TEST(quantizedFromPartsChecked);
    CPPUNIT_TEST(stringsGolden);
    CPPUNIT_TEST(stringsRejectBadInput);
    CPPUNIT_TEST(stringsInBundlesAndStreams);
    CPPUNIT_TEST(raggedGolden);
    CPPUNIT_TEST(ipcRefGolden);
    CPPUNIT_TEST_SUITE_END();

public:
    void sparseGolden() {
        for_cases("sparse", [](const json &c) {
            const std::string name = c.at("name");
            const json &v = c.at("value");
            Bytes file = golden(c);
            // Decode theirs: three dense components, as in the manifest.
            ViewPtr view;
            TENSO_CHECK_OK(tenso_loads(&view.v, file.data(), file.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, sparse_kind(v.at("kind")), tenso_view_kind(view.v));
            for (uint32_t i = 0; i < 3; ++i) {
                const tenso_view *comp = nullptr;
                TENSO_CHECK_OK(tenso_view_component(&comp, view.v, i));
                assert_dense_equals(comp, v.at("components").at(i), name + " component " + std::to_string(i));
            }
            // Encode ours from the same parts: identical bytes (components ignore the options).
            Bytes b[3];
            std::vector<uint64_t> s[3];
            tenso_tensor t[3];
            for (int i = 0; i < 3; ++i) t[i] = tensor_of(v.at("components").at(i), b[i], s[i]);
            std::vector<uint64_t> shape = shape_of(v);
            ValuePtr val;
            TENSO_CHECK_OK(tenso_value_new_sparse(&val.v, sparse_kind(v.at("kind")), uint32_t(shape.size()),
                                                  shape.data(), &t[0], &t[1], &t[2]));
            CPPUNIT_ASSERT_MESSAGE(name + ": bytes differ from upstream", dumps(val.v, options_of(c)) == file);
        });
    }

    void sparseRejectsBadStructure() {
        float data[2] = {1, 2};
        int32_t idx[2] = {0, 3}, ptr[3] = {0, 1, 2}, bad_ptr[3] = {0, 2, 1};
        uint64_t two = 2, three = 3, shape[2] = {2, 3};
        tenso_tensor d{data, sizeof data, &two, 1, TENSO_DTYPE_FLOAT32};
        tenso_tensor i{idx, sizeof idx, &two, 1, TENSO_DTYPE_INT32};
        tenso_tensor p{ptr, sizeof ptr, &three, 1, TENSO_DTYPE_INT32};
        tenso_tensor bp{bad_ptr, sizeof bad_ptr, &three, 1, TENSO_DTYPE_INT32};
        tenso_value *v = nullptr;
        // column 3 is outside a 2x3 matrix
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_value_new_sparse(&v, TENSO_KIND_SPARSE_CSR, 2, shape, &d, &i, &p));
        idx[1] = 2;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_value_new_sparse(&v, TENSO_KIND_SPARSE_CSR, 2, shape, &d, &i, &bp));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_value_new_sparse(&v, TENSO_KIND_DENSE, 2, shape, &d, &i, &p));
        TENSO_CHECK_OK(tenso_value_new_sparse(&v, TENSO_KIND_SPARSE_CSR, 2, shape, &d, &i, &p));
        // A decoder sees the same rule: corrupt an index inside an encoded packet.
        tenso_buffer b = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_value_dumps(&b, v, nullptr));
        tenso_value_free(v);
        tenso_view *view = nullptr;
        TENSO_CHECK_OK(tenso_loads(&view, b.data, b.size, nullptr));
        const tenso_view *comp = nullptr;
        TENSO_CHECK_OK(tenso_view_component(&comp, view, 1));
        size_t at = size_t(static_cast<const uint8_t *>(tenso_view_data(comp)) - b.data) + 4;
        tenso_view_free(view);
        b.data[at] = 9;  // second column index -> 9
        TENSO_CHECK_STATUS(TENSO_E_MALFORMED, tenso_loads(&view, b.data, b.size, nullptr));
        tenso_buffer_dispose(&b);
    }

    void quantizedGolden() {
        for_cases("quantized", [](const json &c) {
            const std::string name = c.at("name");
            const json &v = c.at("value");
            Bytes file = golden(c);
            Bytes input = unhex(v.at("input_hex")), scales = unhex(v.at("scales_hex")),
                  zps = unhex(v.at("zero_points_hex")), body = unhex(v.at("body_hex")),
                  deq = unhex(v.at("dequant_hex"));
            std::vector<uint64_t> shape = shape_of(v);
            tenso_dtype qd = 0;
            TENSO_CHECK_OK(tenso_dtype_from_name(&qd, v.at("dtype").get<std::string>().c_str()));
            // Decode theirs.
            ViewPtr view;
            TENSO_CHECK_OK(tenso_loads(&view.v, file.data(), file.size(), nullptr));
            tenso_quantized q;
            TENSO_CHECK_OK(tenso_view_quantized(&q, view.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, qd, q.dtype);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, scheme_of(v.at("scheme")), q.scheme);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, v.at("axis").get<int32_t>(), q.axis);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, v.at("group_size").get<uint32_t>(), q.group_size);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint32_t(scales.size() / 4), q.num_scales);
            CPPUNIT_ASSERT_MESSAGE(name + ": scales", std::memcmp(q.scales, scales.data(), scales.size()) == 0);
            CPPUNIT_ASSERT_MESSAGE(name + ": zero points", std::memcmp(q.zero_points, zps.data(), zps.size()) == 0);
            CPPUNIT_ASSERT_MESSAGE(name + ": body",
                                   q.nbytes == body.size() && std::memcmp(q.data, body.data(), body.size()) == 0);
            std::vector<float> out(deq.size() / 4);
            TENSO_CHECK_OK(tenso_dequantize(out.data(), out.size(), &q));
            CPPUNIT_ASSERT_MESSAGE(name + ": dequantize is not bit-exact",
                                   std::memcmp(out.data(), deq.data(), deq.size()) == 0);
            // Quantize the same input: identical packet.
            tenso_dtype in_dtype = 0;
            TENSO_CHECK_OK(tenso_dtype_from_name(&in_dtype, v.at("input_dtype").get<std::string>().c_str()));
            tenso_tensor in{input.data(), input.size(), shape.data(), uint32_t(shape.size()), in_dtype};
            ValuePtr val;
            TENSO_CHECK_OK(tenso_quantize(&val.v, &in, qd, scheme_of(v.at("scheme")), v.at("axis").get<int32_t>(),
                                          v.at("group_size").get<uint32_t>()));
            Bytes ours = dumps(val.v, options_of(c));
            CPPUNIT_ASSERT_MESSAGE(name + ": quantized packet differs from upstream", ours == file);
        });
    }

    void quantizeNegativeAxisIsNormalised() {
        float x[6] = {0, 1, 2, 3, 4, 8};
        uint64_t shape[2] = {2, 3};
        tenso_tensor in{x, sizeof x, shape, 2, TENSO_DTYPE_FLOAT32};
        ValuePtr neg, pos;
        TENSO_CHECK_OK(tenso_quantize(&neg.v, &in, TENSO_DTYPE_QINT8, TENSO_QUANT_PER_CHANNEL, -1, 0));
        TENSO_CHECK_OK(tenso_quantize(&pos.v, &in, TENSO_DTYPE_QINT8, TENSO_QUANT_PER_CHANNEL, 1, 0));
        tenso_quantized q;
        TENSO_CHECK_OK(tenso_value_quantized(&q, neg.v));
        CPPUNIT_ASSERT_EQUAL(int32_t(1), q.axis);  // never stored as 255
        CPPUNIT_ASSERT_EQUAL(uint32_t(3), q.num_scales);
        CPPUNIT_ASSERT(dumps(neg.v, TENSO_ENCODE_OPTIONS_INIT) == dumps(pos.v, TENSO_ENCODE_OPTIONS_INIT));
        tenso_value *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_quantize(&v, &in, TENSO_DTYPE_QINT8, TENSO_QUANT_PER_CHANNEL, 2, 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_quantize(&v, &in, TENSO_DTYPE_QINT8, TENSO_QUANT_PER_GROUP, 0, 0));
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_quantize(&v, &in, TENSO_DTYPE_INT8, TENSO_QUANT_PER_TENSOR, 0, 0));
        in.dtype = TENSO_DTYPE_INT32;
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_quantize(&v, &in, TENSO_DTYPE_QINT8, TENSO_QUANT_PER_TENSOR, 0, 0));
    }

    void quantizeHalfInputs() {
        // float16 / bfloat16 inputs are widened exactly, so they quantize like their float32 values.
        float f[4] = {-1.5f, 0.25f, 3.75f, 1.0f};
        uint16_t h[4] = {0xBE00, 0x3400, 0x4380, 0x3C00}, bf[4] = {0xBFC0, 0x3E80, 0x4070, 0x3F80};
        uint64_t shape[1] = {4};
        tenso_tensor tf{f, sizeof f, shape, 1, TENSO_DTYPE_FLOAT32};
        tenso_tensor th{h, sizeof h, shape, 1, TENSO_DTYPE_FLOAT16};
        tenso_tensor tb{bf, sizeof bf, shape, 1, TENSO_DTYPE_BFLOAT16};
        ValuePtr a, b, c;
        TENSO_CHECK_OK(tenso_quantize(&a.v, &tf, TENSO_DTYPE_QUINT4, TENSO_QUANT_PER_TENSOR, 0, 0));
        TENSO_CHECK_OK(tenso_quantize(&b.v, &th, TENSO_DTYPE_QUINT4, TENSO_QUANT_PER_TENSOR, 0, 0));
        TENSO_CHECK_OK(tenso_quantize(&c.v, &tb, TENSO_DTYPE_QUINT4, TENSO_QUANT_PER_TENSOR, 0, 0));
        Bytes want = dumps(a.v, TENSO_ENCODE_OPTIONS_INIT);
        CPPUNIT_ASSERT(dumps(b.v, TENSO_ENCODE_OPTIONS_INIT) == want);
        CPPUNIT_ASSERT(dumps(c.v, TENSO_ENCODE_OPTIONS_INIT) == want);
    }

    void quantizedFromPartsChecked() {
        uint8_t data[3] = {1, 2, 3};
        float s[2] = {0.5f, 0.25f}, z[2] = {0, 1};
        uint64_t shape[1] = {5};
        tenso_quantized q{data, 3, shape, s, z, 1, TENSO_DTYPE_QINT4, TENSO_QUANT_PER_GROUP, 0, 3, 2};
        ValuePtr v;
        TENSO_CHECK_OK(tenso_value_new_quantized(&v.v, &q));
        Bytes p = dumps(v.v, TENSO_ENCODE_OPTIONS_INIT);
        ViewPtr view;
        TENSO_CHECK_OK(tenso_loads(&view.v, p.data(), p.size(), nullptr));
        tenso_quantized back;
        TENSO_CHECK_OK(tenso_view_quantized(&back, view.v));
        float out[5];
        TENSO_CHECK_OK(tenso_dequantize(out, 5, &back));
        // elements 1,0,2,0,3 (low nibble first); group 0 = (q - 0) * 0.5, group 1 = (q - 1) * 0.25
        const float want[5] = {0.5f, 0.0f, 1.0f, -0.25f, 0.5f};
        CPPUNIT_ASSERT(std::memcmp(out, want, sizeof want) == 0);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dequantize(out, 4, &back));
        tenso_value *bad = nullptr;
        q.num_scales = 3;  // ceil(5 / 3) is 2
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_quantized(&bad, &q));
        q.num_scales = 2;
        q.nbytes = 2;  // 5 nibbles need 3 bytes
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_quantized(&bad, &q));
    }

    void stringsGolden() {
        for_cases("string", [](const json &c) {
            const std::string name = c.at("name");
            std::vector<std::string> strs = c.at("value").at("strings").get<std::vector<std::string>>();
            Bytes file = golden(c);
            ViewPtr view;
            tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
            o.flags = TENSO_DECODE_VALIDATE_UTF8;
            TENSO_CHECK_OK(tenso_loads(&view.v, file.data(), file.size(), &o));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, TENSO_KIND_STRING, tenso_view_kind(view.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint64_t(strs.size()), tenso_view_shape(view.v)[0]);
            const uint64_t *offs = nullptr;
            const char *payload = nullptr;
            TENSO_CHECK_OK(tenso_view_string_offsets(&offs, &payload, view.v));
            std::string all;
            std::vector<uint64_t> mine{0};
            for (size_t i = 0; i < strs.size(); ++i) {
                CPPUNIT_ASSERT_EQUAL_MESSAGE(name, strs[i], std::string(payload + offs[i], offs[i + 1] - offs[i]));
                all += strs[i];
                mine.push_back(all.size());
            }
            ValuePtr val;
            TENSO_CHECK_OK(tenso_value_new_strings(&val.v, strs.size(), mine.data(), all.data(), all.size()));
            CPPUNIT_ASSERT_MESSAGE(name + ": bytes differ from upstream", dumps(val.v, options_of(c)) == file);
        });
    }

    void stringsRejectBadInput() {
        const char payload[] = "ab\xff";
        uint64_t offs[3] = {0, 2, 3}, decreasing[3] = {0, 2, 1};
        tenso_value *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_strings(&v, 2, offs, payload, 3));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_strings(&v, 2, decreasing, "abc", 3));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_value_new_strings(&v, 2, offs, "abc", 4));  // length disagrees
        // Decoder: offsets that decrease inside a well-framed packet.
        uint64_t ok[3] = {0, 1, 3};
        TENSO_CHECK_OK(tenso_value_new_strings(&v, 2, ok, "abc", 3));
        tenso_buffer b = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_value_dumps(&b, v, nullptr));
        tenso_value_free(v);
        b.data[64 + 8] = 5;  // offsets[1] = 5 > offsets[2] = 3
        tenso_view *view = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_MALFORMED, tenso_loads(&view, b.data, b.size, nullptr));
        b.data[64 + 8] = 1;
        b.data[64 + 24] = 0xff;  // invalid UTF-8 in the payload: only checked on request
        TENSO_CHECK_OK(tenso_loads(&view, b.data, b.size, nullptr));
        tenso_view_free(view);
        tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
        o.flags = TENSO_DECODE_VALIDATE_UTF8;
        TENSO_CHECK_STATUS(TENSO_E_MALFORMED, tenso_loads(&view, b.data, b.size, &o));
        tenso_buffer_dispose(&b);
    }

    void stringsInBundlesAndStreams() {
        uint64_t offs[3] = {0, 5, 11};
        ValuePtr s, bundle;
        TENSO_CHECK_OK(tenso_value_new_strings(&s.v, 2, offs, "hellowörld", 11));
        TENSO_CHECK_OK(tenso_value_new_bundle(&bundle.v));
        TENSO_CHECK_OK(tenso_bundle_insert(bundle.v, "names", 5, s.v));
        tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
        o.flags = TENSO_ENCODE_INTEGRITY;
        int fds[2];
        CPPUNIT_ASSERT(pipe(fds) == 0);
        TENSO_CHECK_OK(tenso_value_write_fd(nullptr, fds[1], bundle.v, &o));
        close(fds[1]);
        ViewPtr view;
        TENSO_CHECK_OK(tenso_read_fd(&view.v, fds[0], nullptr));
        tenso_view *none = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_read_fd(&none, fds[0], nullptr));
        close(fds[0]);
        const tenso_view *child = nullptr;
        TENSO_CHECK_OK(tenso_view_bundle_find(&child, view.v, "names", 5));
        const uint64_t *got = nullptr;
        const char *payload = nullptr;
        TENSO_CHECK_OK(tenso_view_string_offsets(&got, &payload, child));
        CPPUNIT_ASSERT_EQUAL(std::string("wörld"), std::string(payload + got[1], got[2] - got[1]));
    }

    void raggedGolden() {
        for_cases("ragged", [](const json &c) {
            const std::string name = c.at("name");
            const json &v = c.at("value");
            Bytes file = golden(c), flat;
            std::vector<uint64_t> offs{0};
            for (const auto &h : v.at("rows_hex")) {
                Bytes row = unhex(h);
                flat.insert(flat.end(), row.begin(), row.end());
            }
            tenso_dtype d = 0;
            TENSO_CHECK_OK(tenso_dtype_from_name(&d, v.at("dtype").get<std::string>().c_str()));
            for (uint64_t len : v.at("row_lengths").get<std::vector<uint64_t>>()) offs.push_back(offs.back() + len);
            uint64_t n = offs.back();
            tenso_tensor t{flat.data(), flat.size(), &n, 1, d};
            ValuePtr val;
            TENSO_CHECK_OK(tenso_value_new_ragged(&val.v, &t, offs.size() - 1, offs.data()));
            CPPUNIT_ASSERT_MESSAGE(name + ": bytes differ from upstream", dumps(val.v, options_of(c)) == file);
            ViewPtr view;
            TENSO_CHECK_OK(tenso_loads(&view.v, file.data(), file.size(), nullptr));
            const tenso_view *fv = nullptr, *ov = nullptr;
            TENSO_CHECK_OK(tenso_view_ragged(&fv, &ov, view.v));
            CPPUNIT_ASSERT_EQUAL(uint64_t(offs.size()), tenso_view_shape(ov)[0]);
            CPPUNIT_ASSERT(flat.empty() || std::memcmp(tenso_view_data(fv), flat.data(), flat.size()) == 0);
        });
        // A plain bundle is not ragged.
        ValuePtr b;
        TENSO_CHECK_OK(tenso_value_new_bundle(&b.v));
        Bytes p = dumps(b.v, TENSO_ENCODE_OPTIONS_INIT);
        ViewPtr view;
        TENSO_CHECK_OK(tenso_loads(&view.v, p.data(), p.size(), nullptr));
        const tenso_view *fv = nullptr, *ov = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_ragged(&fv, &ov, view.v));
    }

    void ipcRefGolden() {
        for_cases("gpu_ipc_ref", [](const json &c) {
            const json &v = c.at("value");
            Bytes file = golden(c), handle = unhex(v.at("handle_hex")), uuid = unhex(v.at("uuid_hex"));
            tenso_ipc_ref ref;
            std::memcpy(ref.handle, handle.data(), 64);
            std::memcpy(ref.device_uuid, uuid.data(), 16);
            ref.byte_offset = v.at("byte_offset");
            ref.nbytes = v.at("nbytes");
            ValuePtr val;
            TENSO_CHECK_OK(tenso_value_new_ipc_ref(&val.v, &ref));
            tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
            o.flags = TENSO_ENCODE_INTEGRITY;  // never applies to references
            CPPUNIT_ASSERT(dumps(val.v, o) == file);
            ViewPtr view;
            TENSO_CHECK_OK(tenso_loads(&view.v, file.data(), file.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL(TENSO_KIND_GPU_IPC_REF, tenso_view_kind(view.v));
            tenso_ipc_ref back;
            TENSO_CHECK_OK(tenso_view_ipc_ref(&back, view.v));
            CPPUNIT_ASSERT(std::memcmp(&back, &ref, sizeof ref) == 0);
        });
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiCompositeTest);
