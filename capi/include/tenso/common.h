/*
 * tenso/common.h - export macros and C linkage guards shared by every public header.
 */
#ifndef TENSO_COMMON_H
#define TENSO_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#  define TENSO_BEGIN_DECL extern "C" {
#  define TENSO_END_DECL }
#else
#  define TENSO_BEGIN_DECL
#  define TENSO_END_DECL
#endif

/* The library is built with hidden visibility; only declarations marked TENSO_API are
 * exported (and a linker version script keeps everything but tenso_* private). */
#if defined(TENSO_BUILDING) && defined(__GNUC__)
#  define TENSO_API __attribute__((visibility("default")))
#else
#  define TENSO_API
#endif

#if defined(__GNUC__)
#  define TENSO_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#  define TENSO_DEPRECATED(msg)
#endif

#endif /* TENSO_COMMON_H */
