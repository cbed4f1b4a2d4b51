// control.cpp - control frames: encoding and the hostile-input parser (fuzzed by fuzz_net_control).
#include "net/control.hpp"

#include <cstring>

#include "error.hpp"
#include "format/composites.hpp"

namespace tenso::net {

namespace {

constexpr size_t kFields = 6;
constexpr size_t kMaxMessage = 1024;
const char *const kOps[] = {"push", "push-fd", "get", "ok", "value", "value-fd", "error"};

uint64_t parse_u64(const char *p, size_t n, const char *what) {
    if (n == 0 || n > 20) fail(TENSO_E_MALFORMED, std::string("control frame: bad ") + what);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) {
        if (p[i] < '0' || p[i] > '9') fail(TENSO_E_MALFORMED, std::string("control frame: bad ") + what);
        const uint64_t d = uint64_t(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) fail(TENSO_E_MALFORMED, std::string("control frame: ") + what + " overflows");
        v = v * 10 + d;
    }
    return v;
}

}  // namespace

size_t control_packet_limit(uint32_t max_name_bytes) { return 512 + size_t(max_name_bytes) + kMaxMessage; }

std::vector<uint8_t> encode_control(const Control &c) {
    const std::string f[kFields] = {kOps[int(c.op)],          c.name,
                                    std::to_string(c.status), std::to_string(c.length),
                                    std::to_string(c.offset), c.message.substr(0, kMaxMessage)};
    std::string payload;
    uint64_t offsets[kFields + 1] = {0};
    for (size_t i = 0; i < kFields; ++i) {
        payload += f[i];
        offsets[i + 1] = payload.size();
    }
    const Value v = strings_value(kFields, offsets, reinterpret_cast<const uint8_t *>(payload.data()), payload.size());
    Plan plan(EncodeOptions{}, false);
    plan.add(v);
    std::vector<uint8_t> out(plan.size());
    plan.write_to(out.data());
    return out;
}

Control parse_control(const View &v, uint32_t max_name_bytes) {
    if (v.kind != TENSO_KIND_STRING || v.ndim != 1 || v.shape.data()[0] != kFields || !v.extra ||
        v.extra->offsets.size() != kFields + 1)
        fail(TENSO_E_MALFORMED, "control frame: not a packet of six strings");
    const char *base = reinterpret_cast<const char *>(v.data);
    const uint64_t *o = v.extra->offsets.data();  // checked by decode: non-decreasing, within nbytes
    auto field = [&](size_t i, size_t *n) {
        *n = size_t(o[i + 1] - o[i]);
        return base + o[i];
    };
    size_t n;
    const char *p = field(0, &n);
    Control c;
    bool known = false;
    for (size_t i = 0; i < sizeof kOps / sizeof kOps[0]; ++i)
        if (n == std::strlen(kOps[i]) && std::memcmp(p, kOps[i], n) == 0) {
            c.op = Op(i);
            known = true;
        }
    if (!known) fail(TENSO_E_MALFORMED, "control frame: unknown operation");
    p = field(1, &n);
    const bool named = c.op == Op::kPush || c.op == Op::kPushFd || c.op == Op::kGet;
    if (named && n == 0) fail(TENSO_E_MALFORMED, "control frame: empty name");
    if (n > max_name_bytes) fail(TENSO_E_LIMIT, "control frame: name longer than max_name_bytes");
    c.name.assign(p, n);
    p = field(2, &n);
    if (n > 0 && p[0] == '-') {
        const uint64_t s = parse_u64(p + 1, n - 1, "status");
        if (s > 1000) fail(TENSO_E_MALFORMED, "control frame: status out of range");
        c.status = -int32_t(s);
    } else if (parse_u64(p, n, "status") != 0) {
        fail(TENSO_E_MALFORMED, "control frame: status out of range");
    }
    p = field(3, &n);
    c.length = parse_u64(p, n, "length");
    p = field(4, &n);
    c.offset = parse_u64(p, n, "offset");
    p = field(5, &n);
    if (n > kMaxMessage) fail(TENSO_E_MALFORMED, "control frame: message too long");
    c.message.assign(p, n);
    if (c.op == Op::kError && c.status == 0) fail(TENSO_E_MALFORMED, "control frame: an error without a status");
    return c;
}

}  // namespace tenso::net
