/**
 * @file tenso/common.h
 * @brief export macros and C linkage guards shared by every public header.
 */
#ifndef TENSO_COMMON_H
#define TENSO_COMMON_H

#include <stddef.h>
#include <stdint.h>

/** @def TENSO_BEGIN_DECL
 *  Opens the C-linkage block of a public header (`extern "C" {` in C++, nothing in C). */
/** @def TENSO_END_DECL
 *  Closes the block TENSO_BEGIN_DECL opened. */
#ifdef __cplusplus
#define TENSO_BEGIN_DECL extern "C" {
#define TENSO_END_DECL   }
#else
#define TENSO_BEGIN_DECL
#define TENSO_END_DECL
#endif

/** @def TENSO_API
 *  Marks a declaration as exported. The library is built with hidden visibility; only
 *  declarations marked TENSO_API are exported (and a linker version script keeps everything
 *  but tenso_* private). Expands to nothing for consumers. */
#if defined(TENSO_BUILDING) && defined(__GNUC__)
#define TENSO_API __attribute__((visibility("default")))
#else
#define TENSO_API
#endif

/** @def TENSO_DEPRECATED(msg)
 *  Marks a declaration as deprecated, with `msg` saying what to use instead. A function is
 *  deprecated for at least one minor release before the next major removes it. */
#if defined(__GNUC__)
#define TENSO_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define TENSO_DEPRECATED(msg)
#endif

#endif /* TENSO_COMMON_H */
