// tenso bench [FILE] - a quick self-benchmark of this machine and library build: encoding and
// decoding float32 tensors of a few sizes next to memcpy, and opening and reading a file.
#include "cli.hpp"
#include "json.hpp"
#include "source.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace cli {

namespace {

const char kBenchHelp[] =
    "usage: tenso bench [--json] [FILE]\n"
    "\n"
    "Times tenso_dumps_into (plain and with the XXH3 footer) and tenso_loads (zero copy, and\n"
    "verifying the footer) on float32 tensors of 1 KiB, 1 MiB and 16 MiB, next to memcpy of the\n"
    "same bytes (medians of repeated runs). With FILE, also times opening it and reading every\n"
    "tensor's bytes. Numbers depend on the machine's load: compare within one run.\n"
    "\n"
    "  --json   one JSON document\n"
    "  -h, --help\n";

// Keeps the optimizer from dropping work whose result is otherwise unused.
volatile uint64_t g_sink;

struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
};
using Bytes = std::unique_ptr<uint8_t, FreeDeleter>;

Bytes alloc64(size_t n) {
    void *p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) fail(TENSO_E_NO_MEMORY, "out of memory");
    return Bytes(static_cast<uint8_t *>(p));
}

// Median seconds of `fn` over at least 5 runs and about `budget` seconds (at most 100000).
template <class Fn>
double median_time(Fn fn, double budget = 0.15) {
    std::vector<double> runs;
    double start = now_seconds();
    while (runs.size() < 5 || (now_seconds() - start < budget && runs.size() < 100000)) {
        double t0 = now_seconds();
        fn();
        runs.push_back(now_seconds() - t0);
    }
    std::nth_element(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(runs.size() / 2), runs.end());
    return runs[runs.size() / 2];
}

uint64_t touch(const void *p, uint64_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    uint64_t acc = 0, w;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::memcpy(&w, b + i, 8);
        acc += w;
    }
    for (; i < n; ++i) acc += b[i];
    return acc;
}

struct Row {
    uint64_t bytes;
    double memcpy_s, dumps_s, dumps_integrity_s, loads_s, loads_verify_s;
};

Row bench_size(uint64_t bytes) {
    uint64_t count = bytes / 4;
    Bytes src = alloc64(bytes);
    auto *f = reinterpret_cast<float *>(src.get());
    for (uint64_t i = 0; i < count; ++i) f[i] = static_cast<float>(i % 1000) * 0.5f;
    uint64_t shape[1] = {count};
    tenso_tensor t{src.get(), bytes, shape, 1, TENSO_DTYPE_FLOAT32};
    tenso_encode_options plain = TENSO_ENCODE_OPTIONS_INIT, integ = TENSO_ENCODE_OPTIONS_INIT;
    integ.flags = TENSO_ENCODE_INTEGRITY;
    size_t bound = 0, bound_i = 0;
    check(tenso_dumps_bound(&bound, &t, &plain));
    check(tenso_dumps_bound(&bound_i, &t, &integ));
    Bytes dst = alloc64(bytes), pkt = alloc64(bound), pkt_i = alloc64(bound_i);
    size_t len = 0, len_i = 0;

    Row r{bytes, 0, 0, 0, 0, 0};
    r.memcpy_s = median_time([&] {
        std::memcpy(dst.get(), src.get(), bytes);
        g_sink = dst.get()[bytes - 1];
    });
    r.dumps_s = median_time([&] { check(tenso_dumps_into(pkt.get(), bound, &len, &t, &plain)); });
    r.dumps_integrity_s = median_time([&] { check(tenso_dumps_into(pkt_i.get(), bound_i, &len_i, &t, &integ)); });
    auto loads = [](const uint8_t *p, size_t n) {
        tenso_view *v = nullptr;
        check(tenso_loads(&v, p, n, nullptr));
        g_sink = tenso_view_nbytes(v);
        tenso_view_free(v);
    };
    r.loads_s = median_time([&] { loads(pkt.get(), len); });
    r.loads_verify_s = median_time([&] { loads(pkt_i.get(), len_i); });
    // The decoded bytes must be the encoded ones, or the timings measure nothing useful.
    tenso_view *v = nullptr;
    check(tenso_loads(&v, pkt_i.get(), len_i, nullptr));
    bool same = tenso_view_nbytes(v) == bytes && std::memcmp(tenso_view_data(v), src.get(), bytes) == 0;
    tenso_view_free(v);
    if (!same) fail(TENSO_E_INTERNAL, "decoded bytes differ from the encoded ones");
    return r;
}

std::string cell(double seconds, uint64_t bytes) {
    char buf[64];
    double ns = seconds * 1e9;
    double gbs = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
    if (ns < 10000) std::snprintf(buf, sizeof buf, "%.0f ns", ns);
    else if (ns < 1e6) std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
    else std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
    std::string s = buf;
    if (gbs >= 0.01 && gbs < 1000) {
        std::snprintf(buf, sizeof buf, " (%.1f GB/s)", gbs);
        s += buf;
    }
    return s;
}

struct FileResult {
    std::string format;
    uint64_t tensors = 0, bytes = 0, file_size = 0;
    double open_s = 0, read_s = 0;
};

FileResult bench_file(const std::string &path) {
    FileResult fr;
    double t0 = now_seconds();
    Source src(path, TENSO_FORMAT_AUTO);
    fr.open_s = now_seconds() - t0;
    fr.format = tenso_format_name(src.format());
    fr.file_size = src.file_size();
    uint64_t acc = 0;
    t0 = now_seconds();
    src.for_each([&](const std::string &, const tenso_view *v, uint64_t) {
        ++fr.tensors;
        if (const void *d = tenso_view_data(v)) {
            acc += touch(d, tenso_view_nbytes(v));
            fr.bytes += tenso_view_nbytes(v);
        }
    });
    fr.read_s = now_seconds() - t0;
    g_sink = acc;
    return fr;
}

}  // namespace

int cmd_bench(int argc, char **argv) {
    ArgSpec spec;
    spec.options = {"--json"};
    spec.max_positional = 1;
    Args args;
    if (!parse_args(args, spec, "bench", argc, argv, 2)) return kExitUsage;
    if (args.has("--help")) {
        std::fputs(kBenchHelp, stdout);
        return kExitOk;
    }
    bool json = args.has("--json");
    std::vector<Row> rows;
    FileResult fr;
    std::string file = args.positional.empty() ? "" : args.positional[0];
    try {
        for (uint64_t bytes : {uint64_t(1) << 10, uint64_t(1) << 20, uint64_t(16) << 20})
            rows.push_back(bench_size(bytes));
    } catch (const Failure &f) {
        return report("", f);
    }
    if (!file.empty()) {
        try {
            fr = bench_file(file);
        } catch (const Failure &f) {
            return report(file, f);
        }
    }
    if (json) {
        JsonWriter j(stdout);
        j.begin_object();
        j.key("tenso_version").value(tenso_version_string());
        j.key("sizes").begin_array();
        for (const Row &r : rows) {
            j.begin_object();
            j.key("bytes").value(r.bytes);
            j.key("memcpy_ns").value(r.memcpy_s * 1e9);
            j.key("dumps_into_ns").value(r.dumps_s * 1e9);
            j.key("dumps_into_integrity_ns").value(r.dumps_integrity_s * 1e9);
            j.key("loads_ns").value(r.loads_s * 1e9);
            j.key("loads_verify_ns").value(r.loads_verify_s * 1e9);
            j.end_object();
        }
        j.end_array();
        if (!file.empty()) {
            j.key("file").begin_object();
            j.key("path").value(file);
            j.key("format").value(fr.format);
            j.key("file_size").value(fr.file_size);
            j.key("tensors").value(fr.tensors);
            j.key("bytes_read").value(fr.bytes);
            j.key("open_ns").value(fr.open_s * 1e9);
            j.key("read_all_ns").value(fr.read_s * 1e9);
            j.end_object();
        }
        j.end_object();
        j.finish();
        return kExitOk;
    }
    std::printf("tenso %s, float32 tensors, medians:\n", tenso_version_string());
    std::vector<std::vector<std::string>> cells = {
        {"size", "memcpy", "dumps_into", "dumps_into+xxh3", "loads", "loads+verify"}};
    for (const Row &r : rows)
        cells.push_back({human_bytes(r.bytes), cell(r.memcpy_s, r.bytes), cell(r.dumps_s, r.bytes),
                         cell(r.dumps_integrity_s, r.bytes), cell(r.loads_s, 0), cell(r.loads_verify_s, r.bytes)});
    std::vector<size_t> width(cells[0].size(), 0);
    for (const auto &row : cells)
        for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    for (const auto &row : cells) {
        std::string line = " ";
        for (size_t c = 0; c < row.size(); ++c) line += " " + row[c] + std::string(width[c] - row[c].size(), ' ');
        std::printf("%s\n", line.c_str());
    }
    if (!file.empty())
        std::printf("%s (%s, %" PRIu64 " tensors, %s): open %s, read all %s\n",
                    printable(file.data(), file.size()).c_str(), fr.format.c_str(), fr.tensors,
                    human_bytes(fr.file_size).c_str(), cell(fr.open_s, 0).c_str(), cell(fr.read_s, fr.bytes).c_str());
    return kExitOk;
}

}  // namespace cli
