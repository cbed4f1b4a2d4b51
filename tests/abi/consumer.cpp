// tests/abi/consumer.cpp - a downstream C++17 program that knows tenso only through its installed
// headers and library (pkg-config, or CMake's find_package), through the C++ layer
// tenso/tenso.hpp. Built with strict warnings (-Wconversion, -Wold-style-cast, ...), which the
// header must pass; exits non-zero on any mismatch:
//   - header and library agree on the version;
//   - an f32 tensor encodes to exactly the bytes upstream tenso 0.24.0 writes
//     (tests/vectors/dense_float32_2x3.tenso) and decodes back zero copy;
//   - typed access refuses a wrong dtype with TENSO_E_BAD_DTYPE, a decode error carries its
//     status;
//   - a bundle {"weights": f32[2x3], "step": i64 scalar} round-trips and iterates in order.
#include <tenso/tenso.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, int line, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "consumer.cpp:%d: expected %s\n", line, what);
        ++failures;
    }
}
#define EXPECT(cond) expect((cond), __LINE__, #cond)

// tenso.dumps(np.array([[-1.5, -0.0, 0.25], [1.0, 3.75, 100.5]], np.float32)), upstream 0.24.
std::vector<std::uint8_t> golden_f32_2x3() {
    std::vector<std::uint8_t> g(88, 0);
    const std::uint8_t head[18] = {0x54, 0x4e, 0x53, 0x4f, 0x04, 0x01, 0x00, 0x01, 0x02,
                                   0x00, 0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00};
    const std::uint8_t body[24] = {0x00, 0x00, 0xc0, 0xbf, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x80, 0x3e,
                                   0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x70, 0x40, 0x00, 0x00, 0xc9, 0x42};
    std::memcpy(g.data(), head, sizeof head);
    std::memcpy(g.data() + 64, body, sizeof body);
    return g;
}

const std::vector<float> values = {-1.5f, -0.0f, 0.25f, 1.0f, 3.75f, 100.5f};

void check_version() {
    std::printf("headers %s, library %s\n", TENSO_VERSION_STRING, std::string(tenso::version_string()).c_str());
    EXPECT(tenso::version_number() == TENSO_VERSION_NUMBER);
    EXPECT(tenso::version_string() == TENSO_VERSION_STRING);
}

void check_tensor() {
    const std::vector<std::uint8_t> golden = golden_f32_2x3();
    const tenso::buffer packet = tenso::dumps(tenso::tensor(values, {2, 3}));
    EXPECT(std::vector<std::uint8_t>(packet.begin(), packet.end()) == golden);

    const tenso::view v = tenso::loads(packet.bytes());
    const tenso::span<const float> x = v.as<float>();
    EXPECT(x.size() == 6 && std::vector<float>(x.begin(), x.end()) == values);
    EXPECT(static_cast<const void *>(x.data()) == packet.data() + 64);  // zero copy
    EXPECT(v.shape().size() == 2 && v.shape()[0] == 2 && v.shape()[1] == 3);

    tenso_status refused = TENSO_OK;
    try {
        v.as<std::int32_t>();
    } catch (const tenso::error &e) {
        refused = e.status();
    }
    EXPECT(refused == TENSO_E_BAD_DTYPE);

    const std::string junk = "XXXXXXXXXXXX";
    tenso_status bad = TENSO_OK;
    try {
        tenso::loads(tenso::as_bytes(junk));
    } catch (const tenso::error &e) {
        bad = e.status();
        EXPECT(std::strlen(e.what()) > std::strlen("TENSO_E_BAD_MAGIC: "));
    }
    EXPECT(bad == TENSO_E_BAD_MAGIC);
}

void check_bundle() {
    const std::vector<std::int64_t> step = {1234567890123LL};
    tenso::value bundle = tenso::value::bundle();
    bundle.insert("weights", tenso::tensor(values, {2, 3})).insert("step", tenso::tensor(step.data(), 1, {}));
    EXPECT(bundle.size() == 2);
    const tenso::buffer packet = tenso::dumps(bundle, tenso::encode_options().integrity());
    const tenso::view v = tenso::loads(packet.bytes());

    std::string keys;
    for (const tenso::bundle_entry e : v.entries()) keys += std::string(e.key) + ";";
    EXPECT(keys == "weights;step;");
    EXPECT(v["weights"].to_vector<float>() == values);
    const tenso::view_ref s = v["step"];
    EXPECT(s.ndim() == 0 && s.to_vector<std::int64_t>() == step);
    EXPECT(!v.find("missing"));
}

}  // namespace

int main() {
    try {
        check_version();
        check_tensor();
        check_bundle();
    } catch (const tenso::error &e) {
        std::fprintf(stderr, "consumer.cpp: unexpected %s\n", e.what());
        return 1;
    }
    if (failures != 0) {
        std::fprintf(stderr, "consumer.cpp: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("consumer.cpp: all checks passed\n");
    return 0;
}
