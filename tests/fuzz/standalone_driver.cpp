// standalone_driver.cpp - runs a fuzz target without libFuzzer (zstd's regression_driver.c,
// libgit2's standalone_driver.c): every file named on the command line, and every regular file
// under every directory named (recursively, in sorted order), goes once through
// LLVMFuzzerTestOneInput. Each input sits in a heap block of exactly its size, so a sanitizer
// build catches a read one byte past it.
//
//   replay_<name> [-v] PATH...     exit status 0 when every input ran, 1 when none was found
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
// Present in sanitizer runtimes: lets a sanitizer report name the input too.
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace {

char g_current[4096];  // the input being run, for the crash handlers

void name_current() {
    if (!g_current[0]) return;
    const char pre[] = "\nreplay: crashed on input ";
    ssize_t ignored = ::write(2, pre, sizeof pre - 1);
    ignored = ::write(2, g_current, std::strlen(g_current));
    ignored = ::write(2, "\n", 1);
    (void)ignored;
}

void on_signal(int sig) {
    name_current();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

void collect(const std::string &path, std::vector<std::string> *out) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
        std::fprintf(stderr, "replay: cannot stat %s: %s\n", path.c_str(), std::strerror(errno));
        std::exit(2);
    }
    if (S_ISREG(st.st_mode)) {
        out->push_back(path);
        return;
    }
    if (!S_ISDIR(st.st_mode)) return;
    DIR *d = ::opendir(path.c_str());
    if (!d) {
        std::fprintf(stderr, "replay: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
        std::exit(2);
    }
    std::vector<std::string> names;
    while (struct dirent *e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;  // ., .., and hidden files such as .gitkeep
        names.push_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string &n : names) collect(path + "/" + n, out);
}

bool read_file(const std::string &path, std::vector<uint8_t> *out) {
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    out->clear();
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->insert(out->end(), buf, buf + n);
    bool ok = !std::ferror(f);
    std::fclose(f);
    return ok;
}

}  // namespace

int main(int argc, char **argv) {
    bool verbose = false;
    std::vector<std::string> files;
    std::vector<std::string> roots;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "-v") == 0) verbose = true;
        else roots.push_back(argv[i]);
    }
    if (roots.empty()) {
        std::fprintf(stderr, "usage: %s [-v] FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    for (const std::string &r : roots) collect(r, &files);
    if (files.empty()) {
        std::fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    ::signal(SIGABRT, on_signal);
    ::signal(SIGSEGV, on_signal);
    ::signal(SIGBUS, on_signal);
    ::signal(SIGFPE, on_signal);
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(name_current);

    std::vector<uint8_t> bytes;
    for (const std::string &path : files) {
        if (!read_file(path, &bytes)) {
            std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
            return 2;
        }
        std::snprintf(g_current, sizeof g_current, "%s", path.c_str());
        if (verbose) std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
        // An exact-size copy: nothing after the last byte is addressable.
        uint8_t *exact = static_cast<uint8_t *>(std::malloc(bytes.empty() ? 1 : bytes.size()));
        if (!bytes.empty()) std::memcpy(exact, bytes.data(), bytes.size());
        LLVMFuzzerTestOneInput(exact, bytes.size());
        std::free(exact);
    }
    g_current[0] = '\0';
    std::printf("replay: %zu inputs ran cleanly\n", files.size());
    return 0;
}
