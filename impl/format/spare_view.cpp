// spare_view.cpp - one spare View per thread: what spare_view.hpp's inline paths leave.
#include "format/spare_view.hpp"

#include <new>

#include <pthread.h>

#if TENSO_SPARE_ASAN
#include <sanitizer/asan_interface.h>  // a kept spare is poisoned: a use after free still reports
#else
#define ASAN_POISON_MEMORY_REGION(p, n)   ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

namespace tenso::spare {

__thread Slot t_slot __attribute__((tls_model("initial-exec")));

namespace {
pthread_key_t g_key;
bool g_key_ok = false;

void free_slot(void *) {
    if (t_slot.spare) ASAN_UNPOISON_MEMORY_REGION(t_slot.spare, sizeof(View));
    delete t_slot.spare;
    t_slot = Slot{};  // runs on the exiting thread: a later give keys it anew
}

bool key_slot() {
    if (t_slot.keyed) return true;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    ::pthread_once(&once, [] { g_key_ok = ::pthread_key_create(&g_key, free_slot) == 0; });
    t_slot.keyed = g_key_ok && ::pthread_setspecific(g_key, &t_slot) == 0;
    return t_slot.keyed;
}

// When the library is unloaded (dlclose), its key must not call back into unmapped code at a
// later thread exit: the key goes, and the spares threads still hold are left to the process.
__attribute__((destructor)) void drop_key() {
    if (g_key_ok) ::pthread_key_delete(g_key);
    g_key_ok = false;
}
}  // namespace

View *take_slow() {
    View *v = t_slot.spare;
    if (!v) return new View;
    t_slot.spare = nullptr;
    ASAN_UNPOISON_MEMORY_REGION(v, sizeof(View));
    return v;
}

void give_slow(View *v) noexcept {
    if (t_slot.spare || !key_slot()) {
        delete v;
        return;
    }
    if (!v->bare()) {
        v->~View();
        new (v) View;
    }
    ASAN_POISON_MEMORY_REGION(v, sizeof(View));
    t_slot.spare = v;
}

}  // namespace tenso::spare
