// check.hpp - assertion helpers that name statuses and the last error, so a failure in CI is
// readable without a debugger.
#pragma once

#include <cppunit/extensions/HelperMacros.h>

#include <string>

#include "tenso/tenso.h"

inline std::string tenso_describe(tenso_status st) {
    return std::string(tenso_status_name(st)) + ": " + tenso_last_error();
}

// Asserts that `expr` returns TENSO_OK.
#define TENSO_CHECK_OK(expr)                                                         \
    do {                                                                             \
        tenso_status st_ = (expr);                                                   \
        CPPUNIT_ASSERT_MESSAGE(#expr " -> " + tenso_describe(st_), st_ == TENSO_OK); \
    } while (0)

// Asserts that `expr` returns exactly `want` (and that a message was recorded).
#define TENSO_CHECK_STATUS(want, expr)                                                                     \
    do {                                                                                                   \
        tenso_status st_ = (expr);                                                                         \
        CPPUNIT_ASSERT_MESSAGE(#expr " -> " + tenso_describe(st_) + ", wanted " + tenso_status_name(want), \
                               st_ == (want));                                                             \
        CPPUNIT_ASSERT_MESSAGE(#expr ": no error message recorded",                                        \
                               (want) == TENSO_OK || tenso_last_error()[0] != '\0');                       \
    } while (0)
