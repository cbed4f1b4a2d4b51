/**
 * @file tenso/version.h
 * @brief the one source of the library's version.
 *
 * CMake reads TENSO_VERSION_MAJOR/MINOR/PATCH and TENSO_SOVERSION from this file with a
 * regular expression; nothing else in the tree hard-codes a version.
 */
#ifndef TENSO_VERSION_H
#define TENSO_VERSION_H

/* The version of these headers; tenso_version_number() and tenso_version_string() give the
 * loaded library's. The three lines stay together, bare: build scripts read them. */
/** @def TENSO_VERSION_MAJOR
 *  The major version: the same for every release of one soname. */
/** @def TENSO_VERSION_MINOR
 *  The minor version: a release that adds to the API, compatibly. */
/** @def TENSO_VERSION_PATCH
 *  The patch version: a release of fixes only. */
#define TENSO_VERSION_MAJOR 1
#define TENSO_VERSION_MINOR 5
#define TENSO_VERSION_PATCH 0

/** The ABI major: the soname is libtenso.so.TENSO_SOVERSION. Bumped only on an ABI break. */
#define TENSO_SOVERSION 1

/** The wire protocol version this library writes (it reads v1 to v4). */
#define TENSO_PROTOCOL_VERSION 4

/** The version as one number, major x 10000 + minor x 100 + patch (1.4.0 is 10400); what
 *  tenso_version_number() returns for the library these headers belong to. */
#define TENSO_VERSION_NUMBER (TENSO_VERSION_MAJOR * 10000 + TENSO_VERSION_MINOR * 100 + TENSO_VERSION_PATCH)

/** @cond TENSO_INTERNAL */
#define TENSO_STRINGIFY_(x) #x
#define TENSO_STRINGIFY(x)  TENSO_STRINGIFY_(x)
/** @endcond */
/** The version as a string ("1.4.0"); what tenso_version_string() returns for the library
 *  these headers belong to. */
#define TENSO_VERSION_STRING             \
    TENSO_STRINGIFY(TENSO_VERSION_MAJOR) \
    "." TENSO_STRINGIFY(TENSO_VERSION_MINOR) "." TENSO_STRINGIFY(TENSO_VERSION_PATCH)

#endif /* TENSO_VERSION_H */
