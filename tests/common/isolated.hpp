// isolated.hpp - runs a test body in a forked child, so a crash in the library fails one
// test with a readable message instead of ending the whole suite.
#pragma once

#include <cppunit/Exception.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <string>

// Runs `fn` in a forked child. Returns "" when it passed, else what went wrong (an assertion
// message, or how the child died).
template <class Fn>
inline std::string run_isolated(Fn fn) {
    int fds[2];
    if (::pipe(fds) != 0) return "pipe failed";
    pid_t pid = ::fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
        ::close(fds[0]);
        std::string msg;
        try {
            fn();
        } catch (const CppUnit::Exception &e) {
            msg = e.what();
        } catch (const std::exception &e) {
            msg = e.what();
        }
        if (!msg.empty() && ::write(fds[1], msg.data(), msg.size()) < 0) msg = "?";
        ::_exit(msg.empty() ? 0 : 1);
    }
    ::close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) return "child killed by signal " + std::to_string(WTERMSIG(status)) + " " + msg;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return msg.empty() ? "child exited with status " + std::to_string(WEXITSTATUS(status)) +
                                 " (a crash caught by a sanitizer?)"
                           : msg;
    return std::string();
}
