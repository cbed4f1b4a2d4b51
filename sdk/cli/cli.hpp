// cli.hpp - what the `tenso` subcommands share: exit codes, failures, argument parsing,
// progress bars and formatting. The CLI is a consumer of the public C ABI only.
#pragma once

#include <tenso/tenso.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cli {

// Exit codes, documented in `tenso --help`; scripts test them.
enum Exit : int {
    kExitOk = 0,
    kExitData = 1,      // verification or data failure: corrupt or hostile file, checksum
    kExitUsage = 2,     // bad command line
    kExitIo = 3,        // the system refused: not found, permission, disk full
    kExitInternal = 4,  // a bug, or out of memory
};

// The exit code a library status stands for.
int exit_code_for(tenso_status st);

// A failed step: a tenso status (also for the CLI's own checks), a message, and the tensor it
// concerns when there is one. Thrown inside a command, caught per file.
struct Failure {
    tenso_status status;
    std::string message;
    std::string tensor;  // "" when not about one tensor
};

// Throws a Failure carrying tenso_last_error() when `st` is not TENSO_OK.
void check(tenso_status st, const std::string &context = "");
[[noreturn]] void fail(tenso_status st, const std::string &message);

// Prints `tenso: <file>: [tensor "t": ]<message> (<TENSO_E_NAME>)` to stderr; returns the exit
// code for it.
int report(const std::string &file, const Failure &f);

// A usage error: prints `tenso: <message>` and a pointer to --help; returns kExitUsage.
int usage_error(const std::string &command, const std::string &message);

class JsonWriter;
// Writes "error": {"status", "code", "message"[, "tensor"]} into the current JSON object.
void json_error(JsonWriter &j, const Failure &f);

// ---- command line ----

// What a subcommand accepts. Options are "--name" (a switch) or "--name=" (takes a value,
// given as "--name V" or "--name=V"); short aliases map onto them.
struct ArgSpec {
    std::vector<std::string> options;
    std::map<std::string, std::string> aliases;  // "-q" -> "--quiet"
    size_t min_positional = 0;
    size_t max_positional = SIZE_MAX;
};

struct Args {
    std::vector<std::string> positional;
    std::map<std::string, std::string> values;  // switches map to ""
    bool has(const std::string &opt) const { return values.count(opt) != 0; }
    std::string get(const std::string &opt, const std::string &dflt = "") const {
        auto it = values.find(opt);
        return it == values.end() ? dflt : it->second;
    }
};

// Parses argv[first..argc). Returns false after printing a usage error. "-h"/"--help" set
// values["--help"] and stop the checks on positional counts.
bool parse_args(Args &out, const ArgSpec &spec, const std::string &command, int argc, char **argv, int first);

// ---- output helpers ----

// A progress bar on stderr, drawn only when stdout and stderr are terminals and `enabled`; redrawn at most
// ten times a second, erased by finish() (or the destructor).
class Progress {
public:
    Progress(std::string label, uint64_t total, bool enabled);
    ~Progress();
    Progress(const Progress &) = delete;
    Progress &operator=(const Progress &) = delete;
    void update(uint64_t done);
    void finish();
    // Adapter for tenso_progress_fn; `user` is a Progress*.
    static int callback(uint64_t done, uint64_t total, void *user);

private:
    std::string label_;
    uint64_t total_;
    bool active_;
    double last_draw_ = -1;
    void draw(uint64_t done);
};

std::string human_bytes(uint64_t n);                             // "12.0 MiB", "812 B"
std::string shape_string(const uint64_t *shape, uint32_t ndim);  // "[2, 3]", "[]"
std::string printable(const char *s, size_t n);                  // control bytes escaped, for terminals
std::string kind_name(tenso_kind kind);                          // "dense", "sparse_csr", ...
// The largest power of two dividing `offset`, capped at 4096 (offset 0 counts as 4096).
uint32_t offset_alignment(uint64_t offset);
double now_seconds();  // monotonic

// ---- subcommands: each returns the process exit code ----
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_bench(int argc, char **argv);

}  // namespace cli
