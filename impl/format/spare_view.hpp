// spare_view.hpp - the root View a thread keeps between decodes. For a small packet, new and
// delete of a View cost a third of the decode; tenso_loads() takes this thread's spare instead,
// and tenso_view_free() gives it back. The common cases are inline: a load and a store each.
#pragma once

#include "format/codec.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define TENSO_SPARE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENSO_SPARE_ASAN 1
#endif
#endif
#ifndef TENSO_SPARE_ASAN
#define TENSO_SPARE_ASAN 0  // under ASan every take and give goes out of line, to (un)poison
#endif

namespace tenso {

namespace spare {
// Plain data in initial-exec TLS (__thread: no init wrapper, no __tls_get_addr). The spare is
// deleted at thread exit by the destructor of a pthread key; a thread without one keeps none.
struct Slot {
    View *spare;  // bare (View::bare()); poisoned for ASan while kept
    bool keyed;   // the key's destructor will run for this thread
};
extern __thread Slot t_slot __attribute__((tls_model("initial-exec")));
View *take_slow();
void give_slow(View *v) noexcept;
}  // namespace spare

// A bare View to decode into: the calling thread's spare, or a new one.
inline View *take_view() {
    View *v = spare::t_slot.spare;
    if (TENSO_SPARE_ASAN || !v) return spare::take_slow();
    spare::t_slot.spare = nullptr;
    return v;
}

// Releases what `v` holds (children, a mapping, a decompressed body) and keeps `v` as the
// calling thread's spare, or deletes it when the thread has one already. Null is accepted. A
// dense view is bare already (constructing it again cost a tenth of a small packet's decode).
inline void give_view(View *v) noexcept {
    if (!v) return;
    if (TENSO_SPARE_ASAN || spare::t_slot.spare || !spare::t_slot.keyed || !v->bare()) return spare::give_slow(v);
    spare::t_slot.spare = v;
}

struct GiveView {  // a std::unique_ptr deleter
    void operator()(View *v) const noexcept { give_view(v); }
};

}  // namespace tenso
