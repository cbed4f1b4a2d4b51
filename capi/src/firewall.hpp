// firewall.hpp - what every capi/src/*.cpp shares: the opaque handles' definitions, the
// thread-local error message, and TENSO_API_BEGIN/TENSO_API_END, which turn any exception
// into a status and a message so that no C++ exception ever crosses the C ABI.
#pragma once

#include <new>
#include <string>

#include "tenso/tenso.h"

#include "format/codec.hpp"
#include "error.hpp"

struct tenso_value {
    tenso::Value v;
};
// tenso_view is never defined: a tenso_view* is a tenso::View*, so child views can be handed
// out as pointers into their parent.

namespace tenso::capi {

// Sets the calling thread's message and returns `st`.
tenso_status set_error(tenso_status st, const char *msg) noexcept;
void clear_error() noexcept;
const char *last_error() noexcept;

inline const View *V(const tenso_view *v) { return reinterpret_cast<const View *>(v); }
inline const tenso_view *H(const View *v) { return reinterpret_cast<const tenso_view *>(v); }
// Hands a decoded view to the caller.
inline tenso_view *release_view(std::unique_ptr<View> v) { return const_cast<tenso_view *>(H(v.release())); }

}  // namespace tenso::capi

#define TENSO_API_BEGIN           \
    ::tenso::capi::clear_error(); \
    try {
#define TENSO_API_END                                                                          \
    }                                                                                          \
    catch (const ::tenso::Error &e) {                                                          \
        return ::tenso::capi::set_error(e.status(), e.what());                                 \
    }                                                                                          \
    catch (const std::bad_alloc &) {                                                           \
        return ::tenso::capi::set_error(TENSO_E_NO_MEMORY, "out of memory");                   \
    }                                                                                          \
    catch (const ::tenso::NeedMore &) {                                                        \
        return ::tenso::capi::set_error(TENSO_E_TRUNCATED, "the bytes end before the packet"); \
    }                                                                                          \
    catch (const std::exception &e) {                                                          \
        return ::tenso::capi::set_error(TENSO_E_INTERNAL, e.what());                           \
    }                                                                                          \
    catch (...) {                                                                              \
        return ::tenso::capi::set_error(TENSO_E_INTERNAL, "unknown internal error");           \
    }                                                                                          \
    return TENSO_OK;

#define CHECK_ARG(p) \
    if (!(p)) return ::tenso::capi::set_error(TENSO_E_INVALID_ARGUMENT, #p " is NULL")
