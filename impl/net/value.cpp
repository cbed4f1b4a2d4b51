// value.cpp - received value packets: scanned and measured, then bound (see value.hpp).
#include "net/value.hpp"

#include "error.hpp"

namespace tenso::net {

namespace {
void measure(const tenso::Node &n, Scanned &s) {
    if (n.compressed) s.inflated += n.nbytes;
    if (n.flags & TENSO_FLAG_INTEGRITY) s.checksummed += n.end - n.start;
    for (const tenso::Node::Child &c : n.children) measure(c.node, s);
}
}  // namespace

Scanned scan_received(std::unique_ptr<View> raw, const Limits &lim) {
    Scanned s;
    try {
        s.node = scan(raw->data, size_t(raw->packet_size), lim);
    } catch (const NeedMore &) {
        fail(TENSO_E_MALFORMED, "the value packet is shorter than its headers say");
    }
    s.raw = std::move(raw);
    measure(s.node, s);
    return s;
}

std::unique_ptr<View> bind_received(Scanned &s, const Limits &lim) {
    // The frame's view becomes the value's: one view a push, not two.
    std::unique_ptr<View> v = std::move(s.raw);
    const uint8_t *bytes = v->data;
    const std::shared_ptr<const void> keep = std::move(v->keep);
    *v = View();
    bind_scanned_into(*v, s.node, bytes, lim, keep);
    return v;
}

}  // namespace tenso::net
