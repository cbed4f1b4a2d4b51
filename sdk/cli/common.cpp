#include "cli.hpp"
#include "json.hpp"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <ctime>

namespace cli {

int exit_code_for(tenso_status st) {
    switch (st) {
    case TENSO_OK: return kExitOk;
    case TENSO_E_IO:
    case TENSO_E_NOT_FOUND:
    case TENSO_E_EXISTS: return kExitIo;
    case TENSO_E_NO_MEMORY:
    case TENSO_E_INTERNAL:
    case TENSO_E_NOT_AVAILABLE:
    case TENSO_E_USER: return kExitInternal;
    default:
        // Every other status describes the bytes (malformed, checksum, limits, offsets, a
        // kind the target format cannot hold): the CLI checks its own arguments up front, so
        // an invalid argument reported by the library also comes from the data.
        return kExitData;
    }
}

void fail(tenso_status st, const std::string &message) { throw Failure{st, message, ""}; }

void check(tenso_status st, const std::string &context) {
    if (st == TENSO_OK) return;
    std::string msg = tenso_last_error();
    if (msg.empty()) msg = tenso_status_name(st);
    throw Failure{st, context.empty() ? msg : context + ": " + msg, ""};
}

int report(const std::string &file, const Failure &f) {
    std::string where = file.empty() ? "" : printable(file.data(), file.size()) + ": ";
    if (!f.tensor.empty()) where += "tensor \"" + printable(f.tensor.data(), f.tensor.size()) + "\": ";
    const char *message = f.message.empty() ? "failed" : f.message.c_str();
    std::fprintf(stderr, "tenso: %s%s (%s)\n", where.c_str(), message, tenso_status_name(f.status));
    return exit_code_for(f.status);
}

void json_error(JsonWriter &j, const Failure &f) {
    j.key("error").begin_object();
    j.key("status").value(tenso_status_name(f.status));
    j.key("code").value(static_cast<int64_t>(f.status));
    j.key("message").value(f.message);
    if (!f.tensor.empty()) j.key("tensor").value(f.tensor);
    j.end_object();
}

int usage_error(const std::string &command, const std::string &message) {
    std::string help = command.empty() ? "tenso --help" : "tenso " + command + " --help";
    std::fprintf(stderr, "tenso: %s (see '%s')\n", message.c_str(), help.c_str());
    return kExitUsage;
}

bool parse_args(Args &out, const ArgSpec &spec, const std::string &command, int argc, char **argv, int first) {
    bool options_done = false;
    for (int i = first; i < argc; ++i) {
        std::string arg = argv[i];
        if (options_done || arg.size() < 2 || arg[0] != '-') {
            out.positional.push_back(arg);
            continue;
        }
        if (arg == "--") {
            options_done = true;
            continue;
        }
        if (arg == "-h" || arg == "--help") {
            out.values["--help"] = "";
            return true;
        }
        auto alias = spec.aliases.find(arg);
        if (alias != spec.aliases.end()) arg = alias->second;
        std::string name = arg, value;
        bool inline_value = false;
        size_t eq = arg.find('=');
        if (arg.compare(0, 2, "--") == 0 && eq != std::string::npos) {
            name = arg.substr(0, eq);
            value = arg.substr(eq + 1);
            inline_value = true;
        }
        bool takes_value = false, known = false;
        for (const std::string &o : spec.options) {
            if (o == name) known = true;
            if (o == name + "=") known = takes_value = true;
        }
        if (!known) {
            usage_error(command, "unknown option '" + name + "'");
            return false;
        }
        if (takes_value && !inline_value) {
            if (i + 1 >= argc) {
                usage_error(command, "option '" + name + "' needs a value");
                return false;
            }
            value = argv[++i];
        } else if (!takes_value && inline_value) {
            usage_error(command, "option '" + name + "' takes no value");
            return false;
        }
        out.values[name] = value;
    }
    if (out.positional.size() < spec.min_positional) {
        usage_error(command, "missing arguments");
        return false;
    }
    if (out.positional.size() > spec.max_positional) {
        usage_error(command, "too many arguments ('" + out.positional[spec.max_positional] + "')");
        return false;
    }
    return true;
}

// ---- progress ----

Progress::Progress(std::string label, uint64_t total, bool enabled)
    // Drawn on stderr, and only for a person watching: both streams a terminal (a script that
    // captures stdout gets no bar in its log).
    : label_(std::move(label)), total_(total),
      active_(enabled && ::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t done) {
    if (!active_) return;
    double t = now_seconds();
    if (last_draw_ >= 0 && t - last_draw_ < 0.1 && done < total_) return;
    last_draw_ = t;
    draw(done);
}

void Progress::draw(uint64_t done) {
    const int width = 30;
    double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    if (frac > 1) frac = 1;
    int filled = static_cast<int>(frac * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(width - filled), '.');
    std::fprintf(stderr, "\r%s [%s] %3d%% %s / %s\033[K", label_.c_str(), bar.c_str(), static_cast<int>(frac * 100),
                 human_bytes(done).c_str(), human_bytes(total_).c_str());
    std::fflush(stderr);
}

void Progress::finish() {
    if (!active_) return;
    if (last_draw_ >= 0) std::fputs("\r\033[K", stderr);  // erase the bar's line
    std::fflush(stderr);
    active_ = false;
}

int Progress::callback(uint64_t done, uint64_t total, void *user) {
    auto *p = static_cast<Progress *>(user);
    p->total_ = total;
    p->update(done);
    return 0;
}

// ---- formatting ----

std::string human_bytes(uint64_t n) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) return std::to_string(n) + " B";
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

std::string shape_string(const uint64_t *shape, uint32_t ndim) {
    std::string s = "[";
    for (uint32_t i = 0; i < ndim; ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

std::string printable(const char *s, size_t n) {
    std::string r;
    r.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            r += buf;
        } else {
            r += static_cast<char>(c);
        }
    }
    return r;
}

std::string kind_name(tenso_kind kind) {
    switch (kind) {
    case TENSO_KIND_DENSE: return "dense";
    case TENSO_KIND_BUNDLE: return "bundle";
    case TENSO_KIND_SPARSE_COO: return "sparse_coo";
    case TENSO_KIND_SPARSE_CSR: return "sparse_csr";
    case TENSO_KIND_SPARSE_CSC: return "sparse_csc";
    case TENSO_KIND_QUANTIZED: return "quantized";
    case TENSO_KIND_STRING: return "string";
    case TENSO_KIND_RAGGED: return "ragged";
    case TENSO_KIND_GPU_IPC_REF: return "gpu_ipc_ref";
    default: return "unknown";
    }
}

uint32_t offset_alignment(uint64_t offset) {
    uint32_t a = 1;
    while (a < 4096 && offset % (2ull * a) == 0) a *= 2;
    return a;
}

double now_seconds() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace cli
