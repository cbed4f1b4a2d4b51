// tenso_bench.cpp - throughput and per-call cost of the tenso C API, each set against the
// plain-memory or plain-syscall reference that bounds it (memcpy, write(), read()).
//
// Uses only the public header and links the shared libtenso, so it measures exactly what a
// consumer of the C ABI gets. Every operation is checked for correct output once, outside the
// timed loops, so a number is never reported for a call that did the wrong thing.
// Run with --help for the options; bench/README.md explains the columns.
#include <tenso/tenso.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

// ------------------------------------------------------------------------------------------
// Failure and temporary files
// ------------------------------------------------------------------------------------------

// Temporary files, removed at exit and on fatal signals. Fixed storage so the signal handler
// only touches async-signal-safe state.
constexpr int kMaxTemps = 16;
char g_temps[kMaxTemps][512];
volatile sig_atomic_t g_ntemps = 0;

void remove_temps() {
    for (int i = 0; i < g_ntemps; ++i)
        if (g_temps[i][0]) ::unlink(g_temps[i]);
}

void on_signal(int sig) {
    remove_temps();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

std::string temp_path(const std::string &dir, const char *tag) {
    std::string p = dir + "/tenso_bench." + std::to_string(::getpid()) + "." + tag + ".tenso";
    if (g_ntemps < kMaxTemps && p.size() < sizeof g_temps[0]) {
        std::memcpy(g_temps[g_ntemps], p.c_str(), p.size() + 1);
        g_ntemps = g_ntemps + 1;
    }
    return p;
}

[[noreturn]] void die(const std::string &msg) {
    std::fprintf(stderr, "tenso_bench: %s\n", msg.c_str());
    remove_temps();
    std::exit(1);
}

void check(tenso_status st, const char *what) {
    if (st != TENSO_OK) die(std::string(what) + " failed: " + tenso_status_name(st) + ": " + tenso_last_error());
}

void expect(bool ok, const std::string &what) {
    if (!ok) die("wrong result: " + what);
}

// ------------------------------------------------------------------------------------------
// Memory and data
// ------------------------------------------------------------------------------------------

// 64-byte aligned heap memory, pre-faulted (every page written once) so that timed loops
// measure copies, not first-touch page faults.
class Mem {
public:
    Mem() = default;
    explicit Mem(size_t n) : n_(n) {
        p_ = static_cast<uint8_t *>(std::aligned_alloc(64, std::max<size_t>((n + 63) & ~size_t(63), 64)));
        if (!p_) die("out of memory allocating " + std::to_string(n) + " bytes");
        std::memset(p_, 0, n);
    }
    Mem(Mem &&o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    Mem &operator=(Mem &&o) noexcept {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
        return *this;
    }
    Mem(const Mem &) = delete;
    Mem &operator=(const Mem &) = delete;
    ~Mem() { std::free(p_); }
    uint8_t *data() const { return p_; }
    size_t size() const { return n_; }

private:
    uint8_t *p_ = nullptr;
    size_t n_ = 0;
};

struct Rng {
    uint64_t s;
    uint64_t next() {  // xorshift64*: cheap, deterministic, not compressible by LZ4
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 0x2545F4914F6CDD1DULL;
    }
};

// Uniform floats in [-1, 1): what real activations or weights look like to a compressor.
void fill_random(float *p, size_t n, uint64_t seed) {
    Rng r{seed | 1};
    for (size_t i = 0; i < n; ++i) p[i] = float(int64_t(r.next() >> 40) - (int64_t(1) << 23)) / float(1 << 23);
}

// Small integers 0..15 stored as float32, in runs of 1 to 16 equal values (labels, masks,
// quantised data): the compressible case LZ4 is meant for.
void fill_small_ints(float *p, size_t n, uint64_t seed) {
    Rng r{seed | 1};
    for (size_t i = 0; i < n;) {
        uint64_t x = r.next();
        float v = float((x >> 8) & 15);
        size_t run = std::min<size_t>(1 + ((x >> 16) & 15), n - i);
        for (size_t k = 0; k < run; ++k) p[i + k] = v;
        i += run;
    }
}

// A float32 tensor of `bytes` bytes, shape [bytes / 4].
struct Tensor {
    Mem mem;
    uint64_t shape[1];
    tenso_tensor t;
    Tensor(size_t bytes, bool compressible, uint64_t seed) : mem(bytes) {
        size_t n = bytes / sizeof(float);
        auto *f = reinterpret_cast<float *>(mem.data());
        if (compressible) fill_small_ints(f, n, seed);
        else fill_random(f, n, seed);
        shape[0] = n;
        t = tenso_tensor{mem.data(), uint64_t(n * sizeof(float)), shape, 1, TENSO_DTYPE_FLOAT32};
    }
    Tensor(const Tensor &) = delete;
    Tensor &operator=(const Tensor &) = delete;
};

tenso_encode_options encode_opts(uint32_t flags) {
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    o.flags = flags;
    return o;
}

// The packet for `t` under `flags`, exactly sized, in pre-faulted memory.
Mem encode(const tenso_tensor &t, uint32_t flags, size_t *len_out) {
    tenso_encode_options o = encode_opts(flags);
    size_t bound = 0;
    check(tenso_dumps_bound(&bound, &t, &o), "tenso_dumps_bound");
    Mem m(bound);
    check(tenso_dumps_into(m.data(), m.size(), len_out, &t, &o), "tenso_dumps_into");
    return m;
}

// The packet's body matches the tensor it was encoded from.
void expect_view(const tenso_view *v, const tenso_tensor &t, const char *what) {
    expect(tenso_view_dtype(v) == t.dtype && tenso_view_ndim(v) == 1 && tenso_view_shape(v)[0] == t.shape[0],
           std::string(what) + ": dtype/shape");
    expect(tenso_view_nbytes(v) == t.nbytes, std::string(what) + ": nbytes");
    expect(std::memcmp(tenso_view_data(v), t.data, t.nbytes) == 0, std::string(what) + ": body bytes");
}

// ------------------------------------------------------------------------------------------
// System call helpers (the references)
// ------------------------------------------------------------------------------------------

void write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t r = ::write(fd, p, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            die(std::string("write: ") + std::strerror(errno));
        }
        p += r;
        n -= size_t(r);
    }
}

void read_all(int fd, uint8_t *p, size_t n) {
    while (n) {
        ssize_t r = ::read(fd, p, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            die(std::string("read: ") + std::strerror(errno));
        }
        if (r == 0) die("read: unexpected end of stream");
        p += r;
        n -= size_t(r);
    }
}

// The other end of a socketpair, on its own thread: drains a given number of bytes with
// read() into a scratch buffer (or a capture buffer, to check the bytes), or sends bytes with
// a write() loop. One job at a time; post() starts it and wait() returns when it is done.
class Peer {
public:
    explicit Peer(int fd) : fd_(fd), scratch_(256 * KiB) {
        th_ = std::thread([this] { run(); });
    }
    ~Peer() {
        {
            std::lock_guard<std::mutex> l(m_);
            job_ = kQuit;
        }
        cv_.notify_all();
        th_.join();
    }
    Peer(const Peer &) = delete;
    Peer &operator=(const Peer &) = delete;

    void drain(size_t n, uint8_t *capture = nullptr) { post(kDrain, n, capture); }
    void send(const uint8_t *p, size_t n) { post(kSend, n, const_cast<uint8_t *>(p)); }
    void wait() {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return job_ == kIdle; });
    }

private:
    enum Job { kIdle, kDrain, kSend, kQuit };
    int fd_;
    Mem scratch_;
    std::thread th_;
    std::mutex m_;
    std::condition_variable cv_;
    Job job_ = kIdle;
    size_t n_ = 0;
    uint8_t *p_ = nullptr;

    void post(Job j, size_t n, uint8_t *p) {
        {
            std::lock_guard<std::mutex> l(m_);
            job_ = j;
            n_ = n;
            p_ = p;
        }
        cv_.notify_all();
    }
    void run() {
        for (;;) {
            Job j;
            size_t n;
            uint8_t *p;
            {
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [&] { return job_ != kIdle; });
                j = job_;
                n = n_;
                p = p_;
            }
            if (j == kQuit) return;
            if (j == kSend) {
                write_all(fd_, p, n);
            } else if (p) {
                read_all(fd_, p, n);
            } else {
                for (size_t left = n; left;) {
                    size_t k = std::min(left, scratch_.size());
                    read_all(fd_, scratch_.data(), k);  // read() returns what is there, like a consumer
                    left -= k;
                }
            }
            {
                std::lock_guard<std::mutex> l(m_);
                job_ = kIdle;
            }
            cv_.notify_all();
        }
    }
};

struct SocketPair {
    int fd[2];
    SocketPair() {
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0)
            die(std::string("socketpair: ") + std::strerror(errno));
    }
    ~SocketPair() {
        ::close(fd[0]);
        ::close(fd[1]);
    }
};

// ------------------------------------------------------------------------------------------
// Measurement
// ------------------------------------------------------------------------------------------

struct Config {
    bool quick = false;
    bool huge = true;        // the 1 GiB file
    double min_time = 0.3;   // seconds of timed samples per point, at least
    size_t min_samples = 5;  // and at least this many samples
    std::string json;
    std::string dir;
    std::string only;  // comma-separated groups to run; empty: all
    bool runs(const char *group) const {
        if (only.empty()) return true;
        std::string list = "," + only + ",";
        return list.find("," + std::string(group) + ",") != std::string::npos;
    }
};

double now_ns() {
    return double(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

struct Stats {
    double median_ns = 0, min_ns = 0;  // per call
    uint64_t samples = 0, batch = 1;   // timed samples, calls per sample
};

Stats stats_of(std::vector<double> &v, uint64_t batch) {
    std::sort(v.begin(), v.end());
    Stats s;
    s.batch = batch;
    s.samples = v.size();
    s.min_ns = v.front();
    s.median_ns = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    return s;
}

// Measures several operations together: each is warmed up, then their timed samples are taken
// round-robin until every one has min_samples and the round-robin has run min_time per
// operation. Interleaving makes drift on a shared machine (other tenants, clock changes) hit
// an operation and its reference alike, so the ratios between them stay meaningful. Calls
// under 20 us are batched so the clock's own cost stays out of the per-call figure.
std::vector<Stats> measure(const Config &c, const std::vector<std::function<void()>> &fs) {
    std::vector<uint64_t> batch(fs.size());
    for (size_t i = 0; i < fs.size(); ++i) {
        double t0 = now_ns();
        uint64_t warm = 0;
        do {
            fs[i]();
            ++warm;
        } while (now_ns() - t0 < c.min_time * 1e9 / 20 && warm < 1000);
        double per_call = (now_ns() - t0) / double(warm);
        batch[i] = per_call >= 20000 ? 1 : uint64_t(20000 / std::max(per_call, 1.0)) + 1;
    }
    std::vector<std::vector<double>> v(fs.size());
    const double budget = c.min_time * 1e9 * double(fs.size());
    double start = now_ns();
    while (v[0].size() < c.min_samples || (now_ns() - start < budget && v[0].size() < 1000000)) {
        for (size_t i = 0; i < fs.size(); ++i) {
            double a = now_ns();
            for (uint64_t k = 0; k < batch[i]; ++k) fs[i]();
            v[i].push_back((now_ns() - a) / double(batch[i]));
        }
    }
    std::vector<Stats> out;
    for (size_t i = 0; i < fs.size(); ++i) out.push_back(stats_of(v[i], batch[i]));
    return out;
}

// One timed call (for work that is done once, such as writing the 1 GiB file).
template <class F>
Stats measure_once(F &&f) {
    double a = now_ns();
    f();
    std::vector<double> v{now_ns() - a};
    return stats_of(v, 1);
}

// ------------------------------------------------------------------------------------------
// Results
// ------------------------------------------------------------------------------------------

std::string fmt_size(uint64_t s) {
    char buf[32];
    if (s >= GiB && s % GiB == 0) std::snprintf(buf, sizeof buf, "%llu GiB", (unsigned long long)(s / GiB));
    else if (s >= MiB && s % MiB == 0) std::snprintf(buf, sizeof buf, "%llu MiB", (unsigned long long)(s / MiB));
    else if (s >= KiB && s % KiB == 0) std::snprintf(buf, sizeof buf, "%llu KiB", (unsigned long long)(s / KiB));
    else std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)s);
    return buf;
}

struct Row {
    std::string section;
    uint64_t size = 0;  // tensor body bytes
    std::string op;
    Stats st;
    uint64_t bytes = 0;  // bytes per call the GB/s column counts; 0: not a throughput
    std::string key;     // short name when other rows are compared with this one
    std::string ref;     // the key (or op) of the row this one is compared with
    double ratio = NAN;  // median time / the reference's median time
    std::string note;
};

std::deque<Row> g_rows;  // a deque: references to rows stay valid as rows are added
double g_load_start = NAN, g_load_end = NAN;

// The 1-minute load average: shared machines give noisy numbers, so the output says how busy
// this one was.
double loadavg() {
    double l = NAN;
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &l) != 1) l = NAN;
        std::fclose(f);
    }
    return l;
}

Row &add(const std::string &section, uint64_t size, const std::string &op, const Stats &st, uint64_t bytes,
         const Row *ref = nullptr, std::string note = "") {
    Row r;
    r.section = section;
    r.size = size;
    r.op = op;
    r.st = st;
    r.bytes = bytes;
    if (ref) {
        r.ref = ref->key.empty() ? ref->op : ref->key;
        r.ratio = st.median_ns / ref->st.median_ns;
    }
    r.note = std::move(note);
    g_rows.push_back(std::move(r));
    Row &b = g_rows.back();
    std::fprintf(stderr, "  %-8s %s\n", fmt_size(b.size).c_str(), b.op.c_str());  // progress
    return b;
}

std::string fmt_time(double ns) {
    char buf[32];
    if (ns < 1e3) std::snprintf(buf, sizeof buf, "%.0f ns", ns);
    else if (ns < 1e6) std::snprintf(buf, sizeof buf, "%.2f us", ns / 1e3);
    else if (ns < 1e9) std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
    else std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
    return buf;
}

double gbps(const Row &r) { return r.bytes ? double(r.bytes) / r.st.median_ns : NAN; }  // bytes/ns = GB/s

void print_table() {
    std::printf("tenso_bench: libtenso %s, %u cpus, load average %.2f at start and %.2f at end\n",
                tenso_version_string(), std::thread::hardware_concurrency(), g_load_start, g_load_end);
    std::string section;
    for (const Row &r : g_rows) {
        if (r.section != section) {
            section = r.section;
            std::printf("\n== %s\n", section.c_str());
            std::printf("%-8s %-44s %10s %10s %7s  %-18s %s\n", "size", "op", "median", "min", "GB/s", "vs reference",
                        "samples x calls");
        }
        char g[16] = "-", ratio[64] = "-";
        if (r.bytes) std::snprintf(g, sizeof g, "%.2f", gbps(r));
        if (!std::isnan(r.ratio)) std::snprintf(ratio, sizeof ratio, "%.2fx %s", r.ratio, r.ref.c_str());
        std::printf("%-8s %-44s %10s %10s %7s  %-18s %llu x %llu%s%s\n", fmt_size(r.size).c_str(), r.op.c_str(),
                    fmt_time(r.st.median_ns).c_str(), fmt_time(r.st.min_ns).c_str(), g, ratio,
                    (unsigned long long)r.st.samples, (unsigned long long)r.st.batch, r.note.empty() ? "" : "  ",
                    r.note.c_str());
    }
}

// Adds a reference row: other rows name it by `key` in their ratio column.
const Row &add_ref(const std::string &section, uint64_t size, const std::string &key, const std::string &op,
                   const Stats &st, uint64_t bytes) {
    Row &r = add(section, size, op, st, bytes);
    r.key = key;
    return r;
}

const Row *find(const std::string &section, uint64_t size, const std::string &op) {
    for (const Row &r : g_rows)
        if (r.section == section && r.size == size && r.op == op) return &r;
    return nullptr;
}

// Operations of one section and size, measured together (see measure()). The one given with
// ref(), first, is the reference that the others' ratio column compares with.
class Group {
public:
    Group(const Config &c, const char *section, uint64_t size) : c_(c), section_(section), size_(size) {}
    Group &ref(const char *key, const std::string &op, uint64_t bytes, std::function<void()> f) {
        if (!items_.empty()) die("internal: a group's reference must come first");
        key_ = key;
        items_.push_back(Item{op, bytes, std::move(f), ""});
        return *this;
    }
    Group &op(const std::string &op, uint64_t bytes, std::function<void()> f, std::string note = "") {
        items_.push_back(Item{op, bytes, std::move(f), std::move(note)});
        return *this;
    }
    void run() {
        std::vector<std::function<void()>> fs;
        for (const Item &it : items_) fs.push_back(it.f);
        std::vector<Stats> st = measure(c_, fs);
        const Row *r = nullptr;
        for (size_t i = 0; i < items_.size(); ++i) {
            if (i == 0 && !key_.empty()) r = &add_ref(section_, size_, key_, items_[i].op, st[i], items_[i].bytes);
            else add(section_, size_, items_[i].op, st[i], items_[i].bytes, r, items_[i].note);
        }
    }

private:
    struct Item {
        std::string op;
        uint64_t bytes;
        std::function<void()> f;
        std::string note;
    };
    const Config &c_;
    const char *section_;
    uint64_t size_;
    std::string key_;
    std::vector<Item> items_;
};

std::string json_str(const std::string &s) {
    std::string o = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') o += '\\';
        if (uint8_t(ch) < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", unsigned(uint8_t(ch)));
            o += b;
            continue;
        }
        o += ch;
    }
    return o + "\"";
}

std::string json_num(double v) {
    if (std::isnan(v) || std::isinf(v)) return "null";
    char b[40];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

// ------------------------------------------------------------------------------------------
// Targets (the project's performance goals), checked at the largest size measured
// ------------------------------------------------------------------------------------------

struct Target {
    std::string name;
    double value = NAN;
    std::string unit;
    double limit = NAN;
    bool below = true;  // pass when value <= limit (false: value >= limit)
    bool pass() const { return !std::isnan(value) && (below ? value <= limit : value >= limit); }
};

std::vector<Target> g_targets;

void target(const std::string &name, double value, const std::string &unit, double limit, bool below) {
    g_targets.push_back(Target{name, value, unit, limit, below});
}

void print_summary(const Config &c) {
    std::printf("\n== targets%s\n", c.quick ? " (--quick: smaller sizes and short sampling, indicative only)" : "");
    for (const Target &t : g_targets) {
        char v[32], l[32];
        std::snprintf(v, sizeof v, t.unit == "x" ? "%.3f" : "%.0f", t.value);
        std::snprintf(l, sizeof l, t.unit == "x" ? "%.2f" : "%.0f", t.limit);
        std::printf("%-58s %10s %-3s (target %s %s %s)  %s\n", t.name.c_str(), v, t.unit.c_str(),
                    t.below ? "<=" : ">=", l, t.unit.c_str(), t.pass() ? "PASS" : "MISS");
    }
}

void write_json(const Config &c) {
    FILE *f = std::fopen(c.json.c_str(), "w");
    if (!f) die("cannot write " + c.json + ": " + std::strerror(errno));
    std::fprintf(f,
                 "{\n  \"tenso_version\": %s,\n  \"quick\": %s,\n  \"cpus\": %u,\n  \"min_time_s\": %s,\n"
                 "  \"min_samples\": %zu,\n  \"loadavg_start\": %s,\n  \"loadavg_end\": %s,\n  \"results\": [\n",
                 json_str(tenso_version_string()).c_str(), c.quick ? "true" : "false",
                 std::thread::hardware_concurrency(), json_num(c.min_time).c_str(), c.min_samples,
                 json_num(g_load_start).c_str(), json_num(g_load_end).c_str());
    for (size_t i = 0; i < g_rows.size(); ++i) {
        const Row &r = g_rows[i];
        std::fprintf(f,
                     "    {\"section\": %s, \"size_bytes\": %llu, \"op\": %s, \"median_ns\": %s, \"min_ns\": %s, "
                     "\"samples\": %llu, \"calls_per_sample\": %llu, \"gb_per_s\": %s, \"reference\": %s, "
                     "\"ratio\": %s, \"note\": %s}%s\n",
                     json_str(r.section).c_str(), (unsigned long long)r.size, json_str(r.op).c_str(),
                     json_num(r.st.median_ns).c_str(), json_num(r.st.min_ns).c_str(), (unsigned long long)r.st.samples,
                     (unsigned long long)r.st.batch, json_num(gbps(r)).c_str(),
                     r.ref.empty() ? "null" : json_str(r.ref).c_str(), json_num(r.ratio).c_str(),
                     json_str(r.note).c_str(), i + 1 < g_rows.size() ? "," : "");
    }
    std::fprintf(f, "  ],\n  \"targets\": [\n");
    for (size_t i = 0; i < g_targets.size(); ++i) {
        const Target &t = g_targets[i];
        std::fprintf(f, "    {\"name\": %s, \"value\": %s, \"unit\": %s, \"limit\": %s, \"pass\": %s}%s\n",
                     json_str(t.name).c_str(), json_num(t.value).c_str(), json_str(t.unit).c_str(),
                     json_num(t.limit).c_str(), t.pass() ? "true" : "false", i + 1 < g_targets.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    if (std::fclose(f) != 0) die("cannot write " + c.json + ": " + std::strerror(errno));
}

// ------------------------------------------------------------------------------------------
// The benchmarks
// ------------------------------------------------------------------------------------------

// Encoding into memory: memcpy of the body is the floor every in-memory encoder is held to.
// Minor page faults of one call, after two warm-up calls (what a steady loop of them pays).
template <class F>
long minflt_per_call(F &&f) {
    f();
    f();
    struct rusage a, b;
    ::getrusage(RUSAGE_SELF, &a);
    f();
    ::getrusage(RUSAGE_SELF, &b);
    return b.ru_minflt - a.ru_minflt;
}

void bench_encode(const Config &c, uint64_t size) {
    Tensor t(size, false, size);
    size_t plain_len = 0, sum_len = 0;
    Mem plain = encode(t.t, 0, &plain_len);
    Mem summed = encode(t.t, TENSO_ENCODE_INTEGRITY, &sum_len);
    Mem dst(sum_len);  // large enough for both variants; pre-faulted
    Mem body(size);    // the memcpy reference's destination, pre-faulted too
    tenso_encode_options none = encode_opts(0), integ = encode_opts(TENSO_ENCODE_INTEGRITY);

    // Checks: into == the packet dumps allocates, for both variants.
    size_t w = 0;
    tenso_buffer b = TENSO_BUFFER_INIT;
    check(tenso_dumps(&b, &t.t, &none), "tenso_dumps");
    expect(b.size == plain_len && std::memcmp(b.data, plain.data(), plain_len) == 0, "dumps == dumps_into");
    check(tenso_dumps(&b, &t.t, &integ), "tenso_dumps");
    expect(b.size == sum_len && std::memcmp(b.data, summed.data(), sum_len) == 0, "dumps == dumps_into (integrity)");
    tenso_buffer_dispose(&b);

    auto dumps_alloc = [&](const tenso_encode_options *o) {
        tenso_buffer bb = TENSO_BUFFER_INIT;
        check(tenso_dumps(&bb, &t.t, o), "tenso_dumps");
        tenso_buffer_dispose(&bb);
    };
    // What a fresh output costs: malloc'd memory of this size is new pages from the kernel each
    // time once glibc maps it (above its 32 MiB mmap threshold), kept heap pages below.
    auto fresh_copy = [&] {
        void *p = std::malloc(size);
        if (!p) die("out of memory");
        std::memcpy(p, t.mem.data(), size);
        asm volatile("" : : "r"(p) : "memory");  // the copy is not dead
        std::free(p);
    };
    const std::string faults = "minflt/call: " + std::to_string(minflt_per_call([&] { dumps_alloc(&none); })) +
                               " (malloc + memcpy: " + std::to_string(minflt_per_call(fresh_copy)) + ")";
    Group(c, "encode (float32, random)", size)
        .ref("memcpy", "memcpy body (reference)", size, [&] { std::memcpy(body.data(), t.mem.data(), size); })
        .op("tenso_dumps_into", size,
            [&] { check(tenso_dumps_into(dst.data(), dst.size(), &w, &t.t, &none), "tenso_dumps_into"); })
        .op("tenso_dumps_into +integrity", size,
            [&] { check(tenso_dumps_into(dst.data(), dst.size(), &w, &t.t, &integ), "tenso_dumps_into"); })
        .op(
            "tenso_dumps (allocates) + dispose", size, [&] { dumps_alloc(&none); }, faults)
        .op("tenso_dumps +integrity (allocates) + dispose", size, [&] { dumps_alloc(&integ); })
        .op("malloc + memcpy + free", size, fresh_copy)
        .run();
}

// Decoding from memory: O(1) without integrity, one XXH3 pass with it.
void bench_decode(const Config &c, uint64_t size) {
    Tensor t(size, false, size + 1);
    size_t plain_len = 0, sum_len = 0;
    Mem plain = encode(t.t, 0, &plain_len);
    Mem summed = encode(t.t, TENSO_ENCODE_INTEGRITY, &sum_len);

    tenso_view *v = nullptr;
    check(tenso_loads(&v, plain.data(), plain_len, nullptr), "tenso_loads");
    expect_view(v, t.t, "tenso_loads");
    expect(!tenso_view_owns_data(v) && tenso_view_data(v) == plain.data() + 64, "tenso_loads is zero-copy");
    tenso_view_free(v);
    check(tenso_loads(&v, summed.data(), sum_len, nullptr), "tenso_loads (integrity)");
    expect_view(v, t.t, "tenso_loads (integrity)");
    tenso_view_free(v);

    tenso_tensor_view tv;
    check(tenso_loads_tensor(&tv, plain.data(), plain_len, nullptr), "tenso_loads_tensor");
    expect(tv.data == plain.data() + 64 && tv.nbytes == size && tv.ndim == t.t.ndim &&
               std::memcmp(tv.shape, t.t.shape, 8 * tv.ndim) == 0,
           "tenso_loads_tensor describes the packet in place");

    // Separate groups: interleaving a ~100 ns call with an O(n) one would give it few samples,
    // each taken with caches just trashed by the other. The two O(1) decodes go together:
    // tenso_loads allocates a view, tenso_loads_tensor (1.5) fills the caller's struct.
    Group(c, "decode (float32, random)", size)
        .op("tenso_loads + view_free", 0,
            [&] {
                tenso_view *x = nullptr;
                check(tenso_loads(&x, plain.data(), plain_len, nullptr), "tenso_loads");
                tenso_view_free(x);
            })
        .op("tenso_loads_tensor (caller's struct)", 0,
            [&] { check(tenso_loads_tensor(&tv, plain.data(), plain_len, nullptr), "tenso_loads_tensor"); })
        .run();
    Group(c, "decode (float32, random)", size)
        .op("tenso_loads +verify integrity", size,
            [&] {
                tenso_view *x = nullptr;
                check(tenso_loads(&x, summed.data(), sum_len, nullptr), "tenso_loads");
                tenso_view_free(x);
            })
        .run();
}

// LZ4: compressible small integers (the intended use) and random floats (the worst case), on
// one thread (the reference) and on every core (threads = 0; the same bytes).
void bench_lz4(const Config &c, uint64_t size) {
    tenso_encode_options one = encode_opts(TENSO_ENCODE_COMPRESS), all = one;
    one.threads = 1;
    tenso_decode_options one_d = TENSO_DECODE_OPTIONS_INIT;
    one_d.threads = 1;
    for (int compressible = 1; compressible >= 0; --compressible) {
        Tensor t(size, compressible != 0, size + 2);
        size_t bound = 0, len = 0, len_all = 0;
        check(tenso_dumps_bound(&bound, &t.t, &one), "tenso_dumps_bound");
        Mem dst(bound), dst_all(bound);
        check(tenso_dumps_into(dst.data(), dst.size(), &len, &t.t, &one), "tenso_dumps_into (lz4)");
        check(tenso_dumps_into(dst_all.data(), dst_all.size(), &len_all, &t.t, &all), "tenso_dumps_into (lz4)");
        expect(len == len_all && std::memcmp(dst.data(), dst_all.data(), len) == 0,
               "the same LZ4 frame on one thread and on every core");
        tenso_packet_info info;
        check(tenso_inspect(&info, dst.data(), len), "tenso_inspect");
        expect(info.packet_size == len && (info.flags & TENSO_FLAG_COMPRESSION), "compressed packet framing");
        tenso_view *v = nullptr;
        check(tenso_loads(&v, dst.data(), len, nullptr), "tenso_loads (lz4)");
        expect_view(v, t.t, "tenso_loads (lz4)");
        expect(tenso_view_owns_data(v) != 0, "a decompressed view owns its data");
        tenso_view_free(v);

        char note[64];
        std::snprintf(note, sizeof note, "ratio %.2f:1", double(size) / double(info.body_size));
        std::string kind = compressible ? "small ints" : "random";
        Group(c, "lz4 (TENSO_ENCODE_COMPRESS)", size)
            .ref("lz4-1t", "dumps_into +compress threads=1, " + kind, size,
                 [&] {
                     size_t w = 0;
                     check(tenso_dumps_into(dst.data(), dst.size(), &w, &t.t, &one), "tenso_dumps_into");
                 })
            .op(
                "dumps_into +compress threads=0 (all cores), " + kind, size,
                [&] {
                    size_t w = 0;
                    check(tenso_dumps_into(dst_all.data(), dst_all.size(), &w, &t.t, &all), "tenso_dumps_into");
                },
                note)
            .run();
        Group(c, "lz4 (TENSO_ENCODE_COMPRESS)", size)
            .ref("unlz4-1t", "loads (decompress) + view_free threads=1, " + kind, size,
                 [&] {
                     tenso_view *x = nullptr;
                     check(tenso_loads(&x, dst.data(), len, &one_d), "tenso_loads");
                     tenso_view_free(x);
                 })
            .op("loads (decompress) + view_free threads=0 (all cores), " + kind, size,
                [&] {
                    tenso_view *x = nullptr;
                    check(tenso_loads(&x, dst.data(), len, nullptr), "tenso_loads");
                    tenso_view_free(x);
                })
            .run();
    }
}

// Quantization kernels over float32 weights shaped [rows, 1024]: quantize (one tenso_quantize,
// which allocates its output) and dequantize into a pre-faulted buffer, for every dtype and
// scheme; per-channel along axis 0 (a scale per row, as for Linear weights) and axis 1 (last).
void bench_quant(const Config &c, uint64_t size) {
    Tensor t(size, false, size + 3);
    uint64_t shape[2] = {size / 4 / 1024, 1024};
    tenso_tensor in = t.t;
    in.shape = shape;
    in.ndim = 2;
    Mem out(size), body(size);
    const tenso_dtype qd[4] = {TENSO_DTYPE_QINT8, TENSO_DTYPE_QUINT8, TENSO_DTYPE_QINT4, TENSO_DTYPE_QUINT4};
    struct Scheme {
        int32_t scheme, axis;
        const char *name;
    };
    const Scheme schemes[4] = {{TENSO_QUANT_PER_TENSOR, 0, "per_tensor"},
                               {TENSO_QUANT_PER_CHANNEL, 0, "per_channel axis 0"},
                               {TENSO_QUANT_PER_CHANNEL, 1, "per_channel axis 1"},
                               {TENSO_QUANT_PER_GROUP, 0, "per_group(128)"}};
    for (tenso_dtype d : qd) {
        for (const Scheme &sc : schemes) {
            const int32_t scheme = sc.scheme, axis = sc.axis;
            tenso_value *q = nullptr;
            check(tenso_quantize(&q, &in, d, scheme, axis, 128), "tenso_quantize");
            tenso_quantized parts;
            check(tenso_value_quantized(&parts, q), "tenso_value_quantized");
            check(tenso_dequantize(reinterpret_cast<float *>(out.data()), size / 4, &parts), "tenso_dequantize");
            std::string name = std::string(tenso_dtype_name(d)) + " " + sc.name;
            Group(c, "quantize (float32 [rows, 1024])", size)
                .ref("memcpy", "memcpy of the float32 (reference)", size,
                     [&] { std::memcpy(body.data(), t.mem.data(), size); })
                .op("quantize " + name, size,
                    [&] {
                        tenso_value *x = nullptr;
                        check(tenso_quantize(&x, &in, d, scheme, axis, 128), "tenso_quantize");
                        tenso_value_free(x);
                    })
                .op("dequantize " + name, size,
                    [&] {
                        check(tenso_dequantize(reinterpret_cast<float *>(out.data()), size / 4, &parts),
                              "tenso_dequantize");
                    })
                .run();
            tenso_value_free(q);
        }
    }
}

// Packets to device memory on the available backend (CUDA where a device answers, else the
// host backend): decoding a packet into device memory against a plain upload of its body
// through the same pinned pool, from memory and from a file, back to a packet, and dequantize
// on the device against tenso_dequantize on the host.
void bench_gpu(const Config &c, uint64_t size) {
    // The backend is chosen once per process: a child finds out whether CUDA answers.
    const pid_t pid = ::fork();
    if (pid == 0)
        ::_exit(tenso_gpu_select_backend(TENSO_GPU_BACKEND_CUDA) == TENSO_OK && tenso_gpu_available() == TENSO_OK ? 0
                                                                                                                  : 1);
    int status = 1;
    ::waitpid(pid, &status, 0);
    const bool cuda = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    check(tenso_gpu_select_backend(cuda ? TENSO_GPU_BACKEND_CUDA : TENSO_GPU_BACKEND_HOST), "tenso_gpu_select_backend");
    check(tenso_gpu_available(), "tenso_gpu_available");
    const std::string section = std::string("gpu (") + tenso_gpu_backend_name(tenso_gpu_backend()) + " backend)";
    const char *sec = section.c_str();

    Tensor t(size, false, size + 11);
    tenso_buffer packet = TENSO_BUFFER_INIT;
    check(tenso_dumps(&packet, &t.t, nullptr), "tenso_dumps");
    tenso_gpu_tensor *dev = nullptr;
    check(tenso_gpu_tensor_new(&dev, 0, TENSO_DTYPE_FLOAT32, 1, t.shape), "tenso_gpu_tensor_new");
    const std::string path = temp_path(c.dir, "gpu");
    {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        expect(fd >= 0, "create " + path);
        write_all(fd, packet.data, packet.size);
        ::close(fd);
    }
    Mem back(size);
    Group(c, sec, size)
        .ref("upload", "tenso_gpu_tensor_upload (plain copy through the pinned pool)", size,
             [&] { check(tenso_gpu_tensor_upload(dev, t.mem.data(), size, nullptr), "tenso_gpu_tensor_upload"); })
        .op("tenso_gpu_loads_into (packet -> caller's device memory)", size,
            [&] {
                uint64_t n = 0;
                check(tenso_gpu_loads_into(tenso_gpu_tensor_data(dev), size, &n, packet.data, packet.size, nullptr),
                      "tenso_gpu_loads_into");
            })
        .op("tenso_gpu_loads + value_free (allocates)", size,
            [&] {
                tenso_gpu_value *v = nullptr;
                check(tenso_gpu_loads(&v, packet.data, packet.size, nullptr), "tenso_gpu_loads");
                tenso_gpu_value_free(v);
            })
        .op("tenso_gpu_load_file (page cache -> device) + value_free", size,
            [&] {
                tenso_gpu_value *v = nullptr;
                check(tenso_gpu_load_file(&v, path.c_str(), nullptr), "tenso_gpu_load_file");
                tenso_gpu_value_free(v);
            })
        .op("tenso_gpu_tensor_download", size,
            [&] { check(tenso_gpu_tensor_download(back.data(), size, dev, nullptr), "tenso_gpu_tensor_download"); })
        .op("tenso_gpu_dumps (device -> packet)", size,
            [&] {
                tenso_buffer b = TENSO_BUFFER_INIT;
                check(tenso_gpu_dumps(&b, dev, nullptr, nullptr), "tenso_gpu_dumps");
                tenso_buffer_dispose(&b);
            })
        .run();

    // qint8 per channel: device dequantize (codes uploaded, kernel run) against the host loop.
    uint64_t shape[2] = {size / 4 / 1024, 1024};
    tenso_tensor in = t.t;
    in.shape = shape;
    in.ndim = 2;
    tenso_value *q = nullptr;
    check(tenso_quantize(&q, &in, TENSO_DTYPE_QINT8, TENSO_QUANT_PER_CHANNEL, 1, 0), "tenso_quantize");
    tenso_buffer qb = TENSO_BUFFER_INIT;
    check(tenso_value_dumps(&qb, q, nullptr), "tenso_value_dumps");
    tenso_view *qv = nullptr;
    check(tenso_loads(&qv, qb.data, qb.size, nullptr), "tenso_loads");
    tenso_quantized parts;
    check(tenso_view_quantized(&parts, qv), "tenso_view_quantized");
    Group(c, sec, size)
        .ref("dequantize", "tenso_dequantize qint8 per_channel (host, float32 out)", size,
             [&] {
                 check(tenso_dequantize(reinterpret_cast<float *>(back.data()), size / 4, &parts), "tenso_dequantize");
             })
        .op("tenso_gpu_dequantize qint8 per_channel -> float32 + tensor_free", size,
            [&] {
                tenso_gpu_tensor *o = nullptr;
                check(tenso_gpu_dequantize(&o, qv, TENSO_DTYPE_FLOAT32, nullptr), "tenso_gpu_dequantize");
                tenso_gpu_tensor_free(o);
            })
        .run();
    tenso_view_free(qv);
    tenso_buffer_dispose(&qb);
    tenso_value_free(q);
    tenso_gpu_tensor_free(dev);
    tenso_buffer_dispose(&packet);
    ::unlink(path.c_str());
}

// A 1%-dense float32 matrix as CSR (int32 indices) against the same matrix dense.
void bench_sparse(const Config &c, uint64_t dim) {
    const uint64_t nnz = dim * dim / 100;
    std::vector<float> data(nnz);
    std::vector<int32_t> indices(nnz), indptr(dim + 1);
    fill_random(data.data(), nnz, 7);
    uint64_t k = 0;
    for (uint64_t r = 0; r < dim; ++r) {
        indptr[r] = int32_t(k);
        for (uint64_t j = 0; j < nnz / dim; ++j) indices[k++] = int32_t((j * 100 + r) % dim);
    }
    indptr[dim] = int32_t(k);
    uint64_t shape[2] = {dim, dim}, nnz_shape = k, ptr_shape = dim + 1;
    tenso_tensor a{data.data(), k * 4, &nnz_shape, 1, TENSO_DTYPE_FLOAT32};
    tenso_tensor b{indices.data(), k * 4, &nnz_shape, 1, TENSO_DTYPE_INT32};
    tenso_tensor p{indptr.data(), (dim + 1) * 4, &ptr_shape, 1, TENSO_DTYPE_INT32};
    std::vector<float> dense(dim * dim, 0.0f);
    for (uint64_t r = 0; r < dim; ++r)
        for (int32_t j = indptr[r]; j < indptr[r + 1]; ++j)
            dense[r * dim + uint64_t(indices[size_t(j)])] = data[size_t(j)];
    tenso_tensor dt{dense.data(), dim * dim * 4, shape, 2, TENSO_DTYPE_FLOAT32};
    tenso_value *sv = nullptr;
    check(tenso_value_new_sparse(&sv, TENSO_KIND_SPARSE_CSR, 2, shape, &a, &b, &p), "tenso_value_new_sparse");
    tenso_buffer sp = TENSO_BUFFER_INIT, dp = TENSO_BUFFER_INIT;
    check(tenso_value_dumps(&sp, sv, nullptr), "tenso_value_dumps");
    check(tenso_dumps(&dp, &dt, nullptr), "tenso_dumps");
    Mem sdst(sp.size), ddst(dp.size);
    char note[80];
    std::snprintf(note, sizeof note, "%.1f MiB packet vs %.1f MiB dense", double(sp.size) / MiB, double(dp.size) / MiB);
    Group(c, "sparse CSR 1% vs dense (float32)", dim * dim * 4)
        .ref("dense", "dense dumps_into", dim * dim * 4,
             [&] {
                 size_t w = 0;
                 check(tenso_dumps_into(ddst.data(), ddst.size(), &w, &dt, nullptr), "tenso_dumps_into");
             })
        .op(
            "sparse CSR value_dumps_into", dim * dim * 4,
            [&] {
                size_t w = 0;
                check(tenso_value_dumps_into(sdst.data(), sdst.size(), &w, sv, nullptr), "tenso_value_dumps_into");
            },
            note)
        .op("dense loads + view_free", dim * dim * 4,
            [&] {
                tenso_view *x = nullptr;
                check(tenso_loads(&x, dp.data, dp.size, nullptr), "tenso_loads");
                tenso_view_free(x);
            })
        .op("sparse loads (checks indices) + view_free", dim * dim * 4,
            [&] {
                tenso_view *x = nullptr;
                check(tenso_loads(&x, sp.data, sp.size, nullptr), "tenso_loads");
                tenso_view_free(x);
            })
        .run();
    tenso_value_free(sv);
    tenso_buffer_dispose(&sp);
    tenso_buffer_dispose(&dp);
}

// A Unix socketpair with the other end on its own thread, against write()/read() loops moving
// the same packet bytes over the same kind of socketpair.
// A caller allocator that hands out one buffer again and again (the caller frees each view
// before the next packet), as a receive loop with its own pinned or registered memory would.
struct OneBuffer {
    Mem m;
    static void *alloc(void *u, size_t size, size_t alignment) {
        auto *b = static_cast<OneBuffer *>(u);
        if (alignment > 64) return nullptr;  // Mem is 64-byte aligned
        if (b->m.size() < size) b->m = Mem(size);
        return b->m.data();
    }
    static void release(void *, void *, size_t) {}
};

void bench_stream(const Config &c, uint64_t size) {
    const char *S = "stream (AF_UNIX socketpair)";
    Tensor t(size, false, size + 3);
    size_t len = 0, sum_len = 0;
    Mem pkt = encode(t.t, 0, &len);
    Mem pkt_sum = encode(t.t, TENSO_ENCODE_INTEGRITY, &sum_len);
    tenso_encode_options integ = encode_opts(TENSO_ENCODE_INTEGRITY);

    {  // writer side: this thread writes, the peer drains
        SocketPair sp;
        Peer peer(sp.fd[1]);
        Mem capture(sum_len);
        uint64_t w = 0;
        peer.drain(len, capture.data());
        check(tenso_write_fd(&w, sp.fd[0], &t.t, nullptr), "tenso_write_fd");
        peer.wait();
        expect(w == len && std::memcmp(capture.data(), pkt.data(), len) == 0, "tenso_write_fd bytes");
        peer.drain(sum_len, capture.data());
        check(tenso_write_fd(&w, sp.fd[0], &t.t, &integ), "tenso_write_fd");
        peer.wait();
        expect(w == sum_len && std::memcmp(capture.data(), pkt_sum.data(), sum_len) == 0,
               "tenso_write_fd bytes (integrity)");

        Group(c, S, size)
            .ref("write()", "write() loop of the packet (reference)", size,
                 [&] {
                     peer.drain(len);
                     write_all(sp.fd[0], pkt.data(), len);
                     peer.wait();
                 })
            .op("tenso_write_fd", size,
                [&] {
                    peer.drain(len);
                    check(tenso_write_fd(&w, sp.fd[0], &t.t, nullptr), "tenso_write_fd");
                    peer.wait();
                })
            .op("tenso_write_fd +integrity", size,
                [&] {
                    peer.drain(sum_len);
                    check(tenso_write_fd(&w, sp.fd[0], &t.t, &integ), "tenso_write_fd");
                    peer.wait();
                })
            .run();
    }
    {  // reader side: the peer writes with a write() loop, this thread reads
        SocketPair sp;
        Peer peer(sp.fd[1]);
        Mem buf(len);
        tenso_view *v = nullptr;
        tenso_decoder *dec = nullptr, *dec_caller = nullptr;
        check(tenso_decoder_new(&dec, nullptr), "tenso_decoder_new");
        OneBuffer one;
        tenso_decoder_options co = TENSO_DECODER_OPTIONS_INIT;
        co.alloc = &OneBuffer::alloc;
        co.release = &OneBuffer::release;
        co.alloc_user = &one;
        check(tenso_decoder_new(&dec_caller, &co), "tenso_decoder_new");
        peer.send(pkt.data(), len);
        check(tenso_read_fd(&v, sp.fd[0], nullptr), "tenso_read_fd");
        peer.wait();
        expect_view(v, t.t, "tenso_read_fd");
        expect(tenso_view_packet_size(v) == len, "tenso_read_fd packet size");
        tenso_view_free(v);

        // One packet through tenso_decoder_read_fd on `d`, or tenso_read_fd when d is null.
        auto read_with = [&](tenso_decoder *d) -> std::function<void()> {
            return [&, d] {
                peer.send(pkt.data(), len);
                tenso_view *x = nullptr;
                check(d ? tenso_decoder_read_fd(&x, d, sp.fd[0]) : tenso_read_fd(&x, sp.fd[0], nullptr), "read");
                tenso_view_free(x);
                peer.wait();
            };
        };
        auto read_reused = [&] {
            peer.send(pkt.data(), len);
            read_all(sp.fd[0], buf.data(), len);
            peer.wait();
        };
        // A 64 MiB read takes ~20 ms, so the default time gives it 5 samples, and single
        // samples here vary by up to 1.7x: large packets get at least 15.
        Config many = c;
        if (size >= 16 * MiB) many.min_samples = std::max<size_t>(c.min_samples, 15);
        Group(many, S, size)
            .ref("read()", "read() loop into a reused buffer (reference)", size, read_reused)
            .op("tenso_read_fd + view_free", size, read_with(nullptr))
            .op("tenso_decoder_read_fd (its reused buffer) + view_free", size, read_with(dec))
            .op("tenso_decoder_read_fd (caller's reused buffer) + view_free", size, read_with(dec_caller))
            .run();
        // Apart: each sample's 64 MiB of page faults and munmap slowed the operation timed next.
        Group(c, S, size)
            .ref("read()", "read() loop into a reused buffer (reference, again)", size, read_reused)
            .op("read() loop into a fresh malloc (reference)", size,
                [&] {
                    peer.send(pkt.data(), len);
                    auto *p = static_cast<uint8_t *>(std::aligned_alloc(64, (len + 63) & ~size_t(63)));
                    if (!p) die("out of memory");
                    read_all(sp.fd[0], p, len);
                    std::free(p);
                    peer.wait();
                })
            .run();
        tenso_decoder_free(dec);
        tenso_decoder_free(dec_caller);
    }
}

// A TCP loopback connection: fd[0] the accepted end, fd[1] the connecting end.
struct TcpPair {
    int fd[2] = {-1, -1};
    TcpPair() {
        int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (l < 0) die(std::string("socket: ") + std::strerror(errno));
        struct sockaddr_in a;
        std::memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t al = sizeof a;
        if (::bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
            ::getsockname(l, reinterpret_cast<sockaddr *>(&a), &al) != 0)
            die(std::string("listen: ") + std::strerror(errno));
        fd[1] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd[1] < 0 || ::connect(fd[1], reinterpret_cast<sockaddr *>(&a), sizeof a) != 0)
            die(std::string("connect: ") + std::strerror(errno));
        fd[0] = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd[0] < 0) die(std::string("accept: ") + std::strerror(errno));
        ::close(l);
        int one = 1;
        ::setsockopt(fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    ~TcpPair() {
        ::close(fd[0]);
        ::close(fd[1]);
    }
};

// 1 KiB float32 tensors back to back over TCP loopback: the peer thread sends a batch of
// packets with a write() loop (as a sender with its own buffering would), this thread receives
// them one packet per call. Reference: read() of the same bytes 64 KiB at a time.
void bench_small_packets(const Config &c) {
    const char *S = "small packets (TCP loopback, 1 KiB float32)";
    const size_t kPackets = c.quick ? 2000 : 20000;
    Tensor t(KiB, false, 7);
    size_t len = 0;
    Mem pkt = encode(t.t, 0, &len);
    Mem all(len * kPackets);
    for (size_t i = 0; i < kPackets; ++i) std::memcpy(all.data() + i * len, pkt.data(), len);
    const size_t total = len * kPackets;
    TcpPair tp;
    Peer peer(tp.fd[1]);
    tenso_decoder_options ra = TENSO_DECODER_OPTIONS_INIT;
    ra.flags = TENSO_DECODER_READ_AHEAD;
    tenso_decoder *dec = nullptr;
    check(tenso_decoder_new(&dec, &ra), "tenso_decoder_new");
    Mem chunk(64 * KiB);
    auto receive = [&](tenso_decoder *d) {
        peer.send(all.data(), total);
        for (size_t i = 0; i < kPackets; ++i) {
            tenso_view *x = nullptr;
            check(d ? tenso_decoder_read_fd(&x, d, tp.fd[0]) : tenso_read_fd(&x, tp.fd[0], nullptr), "read");
            tenso_view_free(x);
        }
        peer.wait();
    };
    {  // checked once
        peer.send(all.data(), len);
        tenso_view *x = nullptr;
        check(tenso_decoder_read_fd(&x, dec, tp.fd[0]), "tenso_decoder_read_fd");
        peer.wait();
        expect_view(x, t.t, "tenso_decoder_read_fd READ_AHEAD");
        tenso_view_free(x);
    }
    Group(c, S, KiB)
        .ref("read()", "read() of the same bytes, 64 KiB at a time (reference)", total,
             [&] {
                 peer.send(all.data(), total);
                 for (size_t left = total; left;) {
                     ssize_t r = ::read(tp.fd[0], chunk.data(), std::min(left, chunk.size()));
                     if (r <= 0) die("read: end of stream");
                     left -= size_t(r);
                 }
                 peer.wait();
             })
        .op("tenso_decoder_read_fd READ_AHEAD + view_free, per batch", total, [&] { receive(dec); })
        .op("tenso_read_fd + view_free, per batch", total, [&] { receive(nullptr); })
        .run();
    tenso_decoder_free(dec);
    if (const Row *r = find(S, KiB, "tenso_decoder_read_fd READ_AHEAD + view_free, per batch"))
        target("1 KiB packets over TCP loopback, READ_AHEAD, packets/s", double(kPackets) * 1e9 / r->st.median_ns, "/s",
               500000, false);
}

void fsync_dir(const std::string &dir) {
    int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
        ::fsync(d);
        ::close(d);
    }
}

// Files: the atomic save (whose fsync is most of its cost) and both load modes.
void bench_file(const Config &c, uint64_t size, bool once) {
    const char *S = "file";
    std::string tag = fmt_size(size);
    tag.erase(std::remove(tag.begin(), tag.end(), ' '), tag.end());
    std::string path = temp_path(c.dir, tag.c_str());
    std::string raw_path = temp_path(c.dir, (tag + ".raw").c_str());
    std::string raw_tmp = temp_path(c.dir, (tag + ".raw.tmp").c_str());
    size_t len = 0;
    {
        Tensor t(size, false, size + 4);
        check(tenso_dumps_bound(&len, &t.t, nullptr), "tenso_dumps_bound");  // exact, uncompressed
        if (once) {  // 1 GiB: written once; the time is that single sample
            add(S, size, "tenso_save_file (atomic, fsync), once",
                measure_once([&] { check(tenso_save_file(path.c_str(), &t.t, nullptr), "tenso_save_file"); }), size);
        } else {
            Mem pkt = encode(t.t, 0, &len);
            Group(c, S, size)
                .ref("raw save", "write()+fsync+rename (reference)", size,
                     [&] {
                         int fd = ::open(raw_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                         if (fd < 0) die("open " + raw_tmp + ": " + std::strerror(errno));
                         write_all(fd, pkt.data(), len);
                         if (::fsync(fd) != 0) die(std::string("fsync: ") + std::strerror(errno));
                         ::close(fd);
                         if (::rename(raw_tmp.c_str(), raw_path.c_str()) != 0) die("rename");
                     })
                .op("tenso_save_file (atomic, fsync)", size,
                    [&] { check(tenso_save_file(path.c_str(), &t.t, nullptr), "tenso_save_file"); })
                // A new file each time: truncating or renaming over an existing file makes ext4
                // start writeback at close (auto_da_alloc), which is not what this row is about.
                .op("tenso_write_fd to a new file, no fsync", size,
                    [&] {
                        ::unlink(raw_tmp.c_str());
                        int fd = ::open(raw_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                        if (fd < 0) die("open " + raw_tmp + ": " + std::strerror(errno));
                        check(tenso_write_fd(nullptr, fd, &t.t, nullptr), "tenso_write_fd");
                        ::close(fd);
                        ::unlink(raw_tmp.c_str());
                    })
                .run();
            ::unlink(raw_path.c_str());
        }
        fsync_dir(c.dir);

        // Checks: the saved file is the packet; both modes read it back.
        struct stat st;
        expect(::stat(path.c_str(), &st) == 0 && uint64_t(st.st_size) == len, "saved file size");
        for (uint32_t mode : {TENSO_LOAD_READ, TENSO_LOAD_MMAP}) {
            tenso_view *v = nullptr;
            check(tenso_load_file(&v, path.c_str(), mode, nullptr), "tenso_load_file");
            expect_view(v, t.t, mode == TENSO_LOAD_MMAP ? "tenso_load_file(MMAP)" : "tenso_load_file(READ)");
            tenso_view_free(v);
        }
    }  // the source tensor is freed before the loads, which allocate their own copy

    Mem buf(len);
    Group(c, S, size)
        .ref("read() file", "open+read() into a reused buffer (reference)", size,
             [&] {
                 int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
                 if (fd < 0) die("open " + path + ": " + std::strerror(errno));
                 read_all(fd, buf.data(), len);
                 ::close(fd);
             })
        .op("tenso_load_file READ + view_free", size,
            [&] {
                tenso_view *v = nullptr;
                check(tenso_load_file(&v, path.c_str(), TENSO_LOAD_READ, nullptr), "tenso_load_file");
                tenso_view_free(v);
            })
        .run();
    Group(c, S, size)  // alone, for the same reason as tenso_loads
        .op(
            "tenso_load_file MMAP + view_free", 0,
            [&] {
                tenso_view *v = nullptr;
                check(tenso_load_file(&v, path.c_str(), TENSO_LOAD_MMAP, nullptr), "tenso_load_file");
                tenso_view_free(v);
            },
            "O(1): maps, reads the header page")
        .run();
    ::unlink(path.c_str());
}

#include "bench_cache.inc"
#include "bench_archive.inc"
#include "bench_net.inc"

void usage(FILE *f) {
    std::fprintf(f,
                 "usage: tenso_bench [--quick] [--json PATH] [--only GROUPS] [--dir DIR] [--no-huge]\n"
                 "                   [--min-time S]\n"
                 "\n"
                 "Measures the tenso C API (libtenso %s) against memcpy/write()/read() references:\n"
                 "encode into memory, decode (zero-copy and with integrity), LZ4, socketpair streams,\n"
                 "and files (atomic save, READ and MMAP loads). Prints a table on stdout.\n"
                 "\n"
                 "  --quick       a few seconds: sizes up to 1 MiB, short sampling, no 1 GiB file\n"
                 "                (the CTest smoke test bench.smoke runs this)\n"
                 "  --json PATH   also write the results as JSON to PATH\n"
                 "  --only GROUPS run only these comma-separated groups: encode, decode, lz4,\n"
                 "                stream, file, quant, sparse, cache, archive, gpu, net (default: all)\n"
                 "  --dir DIR     where temporary packet files go (default $TMPDIR or /tmp); they\n"
                 "                are removed afterwards. The full run writes a 1 GiB file there.\n"
                 "  --no-huge     skip the 1 GiB file\n"
                 "  --min-time S  seconds of timed samples per point (default 0.3; quick 0.01)\n"
                 "  --help        this text\n",
                 tenso_version_string());
}

}  // namespace

int main(int argc, char **argv) {
    Config c;
    bool min_time_set = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](const char *name) -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "tenso_bench: %s needs a value\n", name);
                usage(stderr);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        } else if (a == "--quick") {
            c.quick = true;
        } else if (a == "--json") {
            c.json = value("--json");
        } else if (a == "--dir") {
            c.dir = value("--dir");
        } else if (a == "--only") {
            c.only = value("--only");
            for (size_t p = 0; p <= c.only.size();) {
                size_t q = std::min(c.only.find(',', p), c.only.size());
                std::string g = c.only.substr(p, q - p);
                if (g != "encode" && g != "decode" && g != "lz4" && g != "stream" && g != "file" && g != "quant" &&
                    g != "sparse" && g != "cache" && g != "archive" && g != "gpu" && g != "net") {
                    std::fprintf(stderr, "tenso_bench: unknown group '%s' in --only\n", g.c_str());
                    return 2;
                }
                p = q + 1;
            }
        } else if (a == "--no-huge") {
            c.huge = false;
        } else if (a == "--min-time") {
            std::string v = value("--min-time");
            char *end = nullptr;
            c.min_time = std::strtod(v.c_str(), &end);
            if (!end || *end || !(c.min_time > 0)) {
                std::fprintf(stderr, "tenso_bench: --min-time needs a positive number of seconds\n");
                return 2;
            }
            min_time_set = true;
        } else {
            std::fprintf(stderr, "tenso_bench: unknown option '%s'\n", a.c_str());
            usage(stderr);
            return 2;
        }
    }
    if (tenso_version_number() != TENSO_VERSION_NUMBER)
        die(std::string("built against tenso ") + TENSO_VERSION_STRING + " but loaded " + tenso_version_string());
    if (c.dir.empty()) {
        const char *t = std::getenv("TMPDIR");
        c.dir = t && *t ? t : "/tmp";
    }
    if (c.quick) {
        c.huge = false;
        c.min_samples = 3;
        if (!min_time_set) c.min_time = 0.01;
    }
    // Temporary files go on interruption and on a crash too (a crash in libtenso is what a
    // failing bench.smoke will most likely be).
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGSEGV, SIGBUS, SIGABRT, SIGFPE}) ::signal(sig, on_signal);
    ::signal(SIGPIPE, SIG_IGN);  // a dying peer must show up as EPIPE, not kill the bench
    std::atexit(remove_temps);

    std::vector<uint64_t> sizes = {KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB};
    std::vector<uint64_t> stream_sizes = {MiB, 64 * MiB};
    uint64_t file_size = 64 * MiB;
    if (c.quick) {
        sizes = {KiB, 64 * KiB, MiB};
        stream_sizes = {MiB};
        file_size = MiB;
    }
    std::fprintf(stderr, "tenso_bench: libtenso %s, %u cpus, min %.2f s and %zu samples per point\n",
                 tenso_version_string(), std::thread::hardware_concurrency(), c.min_time, c.min_samples);

    g_load_start = loadavg();
    if (c.runs("encode"))
        for (uint64_t s : sizes) bench_encode(c, s);
    if (c.runs("decode"))
        for (uint64_t s : sizes) bench_decode(c, s);
    if (c.runs("lz4"))
        for (uint64_t s : sizes) bench_lz4(c, s);
    if (c.runs("quant")) bench_quant(c, c.quick ? MiB : 64 * MiB);
    if (c.runs("sparse")) bench_sparse(c, c.quick ? 1024 : 8192);
    if (c.runs("stream")) {
        for (uint64_t s : stream_sizes) bench_stream(c, s);
        bench_small_packets(c);
    }
    if (c.runs("cache")) bench_cache(c);
    if (c.runs("gpu")) bench_gpu(c, c.quick ? MiB : 64 * MiB);
    if (c.runs("archive")) bench_archive(c);
    if (c.runs("net")) bench_net(c);
    if (c.runs("file")) {
        bench_file(c, file_size, false);
        if (c.huge) bench_file(c, GiB, true);
    }

    g_load_end = loadavg();

    // Targets, at the largest size this run measured.
    const uint64_t big = sizes.back(), sbig = stream_sizes.back();
    const std::string at = " @ " + fmt_size(big), sat = " @ " + fmt_size(sbig);
    const char *E = "encode (float32, random)", *D = "decode (float32, random)", *T = "stream (AF_UNIX socketpair)";
    if (const Row *r = find(E, big, "tenso_dumps_into")) target("dumps_into / memcpy" + at, r->ratio, "x", 1.1, true);
    if (const Row *r = find(E, big, "tenso_dumps_into +integrity"))
        target("dumps_into +integrity / memcpy" + at, r->ratio, "x", 1.3, true);
    for (uint64_t s : {MiB, 16 * MiB, 64 * MiB}) {
        const Row *p = find(E, s, "tenso_dumps_into"), *i = find(E, s, "tenso_dumps_into +integrity");
        if (p && i)
            target("dumps_into +integrity / dumps_into @ " + fmt_size(s), i->st.median_ns / p->st.median_ns, "x", 1.2,
                   true);
    }
    if (const Row *r = find(E, big, "tenso_dumps (allocates) + dispose"))
        target("tenso_dumps (allocating) / memcpy" + at, r->ratio, "x", 1.1, true);
    const Row *l1 = find(D, KiB, "tenso_loads + view_free"), *lb = find(D, big, "tenso_loads + view_free");
    if (lb) target("tenso_loads" + at, lb->st.median_ns, "ns", 1000, true);
    if (l1 && lb)
        target("tenso_loads" + at + " / tenso_loads @ 1 KiB (O(1))", lb->st.median_ns / l1->st.median_ns, "x", 2.0,
               true);
    for (uint64_t s : {MiB, sbig}) {
        const std::string a = " @ " + fmt_size(s);
        if (const Row *r = find(T, s, "tenso_read_fd + view_free"))
            target("tenso_read_fd / read() loop" + a, r->ratio, "x", 1.2, true);
        if (const Row *r = find(T, s, "tenso_decoder_read_fd (caller's reused buffer) + view_free"))
            target("tenso_decoder_read_fd, caller buffer / read() loop" + a, r->ratio, "x", 1.05, true);
        if (s == sbig) break;
    }
    if (const Row *r = find(T, sbig, "tenso_write_fd"))
        target("tenso_write_fd / write() loop throughput" + sat, 1 / r->ratio, "x", 0.9, false);
    if (const Row *r = find("file", GiB, "tenso_load_file MMAP + view_free"))
        target("tenso_load_file MMAP @ 1 GiB", r->st.median_ns, "ns", 100000, true);
    else if (const Row *r2 = find("file", file_size, "tenso_load_file MMAP + view_free"))
        target("tenso_load_file MMAP @ " + fmt_size(file_size), r2->st.median_ns, "ns", 100000, true);

    print_table();
    print_summary(c);
    if (!c.json.empty()) write_json(c);
    return 0;
}
