/*
 * tenso/version.h - the one source of the library's version.
 *
 * CMake reads TENSO_VERSION_MAJOR/MINOR/PATCH and TENSO_SOVERSION from this file with a
 * regular expression; nothing else in the tree hard-codes a version.
 */
#ifndef TENSO_VERSION_H
#define TENSO_VERSION_H

#define TENSO_VERSION_MAJOR 1
#define TENSO_VERSION_MINOR 4
#define TENSO_VERSION_PATCH 0

/** The ABI major: the soname is libtenso.so.TENSO_SOVERSION. Bumped only on an ABI break. */
#define TENSO_SOVERSION 1

/** The wire protocol version this library writes (it reads v1 to v4). */
#define TENSO_PROTOCOL_VERSION 4

#define TENSO_VERSION_NUMBER \
    (TENSO_VERSION_MAJOR * 10000 + TENSO_VERSION_MINOR * 100 + TENSO_VERSION_PATCH)

#define TENSO_STRINGIFY_(x) #x
#define TENSO_STRINGIFY(x) TENSO_STRINGIFY_(x)
#define TENSO_VERSION_STRING \
    TENSO_STRINGIFY(TENSO_VERSION_MAJOR) "." TENSO_STRINGIFY(TENSO_VERSION_MINOR) "." \
    TENSO_STRINGIFY(TENSO_VERSION_PATCH)

#endif /* TENSO_VERSION_H */
