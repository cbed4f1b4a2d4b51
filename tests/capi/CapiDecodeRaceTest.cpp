// CapiDecodeRaceTest - decoding bytes that another writer rewrites meanwhile (a shared-memory
// reader racing a later put, which shm.h allows). A thread flips one field between a valid and
// a hostile value while this thread decodes in a loop: every decode must give OK or the one
// clean error the hostile value earns, and an OK view must stay inside the bytes. Before the
// decoder read each field once, a field checked by the scan and read again to be used gave
// 128 MiB copies past the mapping (num_scales) or a string view of a TiB (offsets).
//
// The writer writes through a second mapping of the same memfd, as another process would: the
// race is on the memory, not on C++ objects, so ThreadSanitizer builds run it too. Each race
// runs until it has seen both an OK and a refused decode (bounded by a count, not by time), so
// a race that never happened cannot pass.
//
// A cache pool's entry table is such memory too: its space fields are flipped the same way
// while this thread gets, inspects and rewrites the entry in place. So is a mapped archive
// file: a hash table slot is flipped while this thread opens the archive.
#include <cppunit/extensions/HelperMacros.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "CapiArchiveUtil.hpp"
#include "CapiCacheUtil.hpp"
#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

using namespace hostile;

namespace {

constexpr int kDecodes = 200000;      // the old code failed within a few thousand
constexpr int kMaxDecodes = 2000000;  // the bound while an OK or a refusal is still unseen

// Stores `good` and `bad` alternately into the little-endian field of `width` bytes at `f`
// until destroyed.
class Flipper {
public:
    Flipper(uint8_t *f, int width, uint64_t good, uint64_t bad)
        : thread_([=] {
              while (!stop_.load(std::memory_order_relaxed)) {
                  for (int i = 0; i < width; ++i) __atomic_store_n(f + i, uint8_t(bad >> (8 * i)), __ATOMIC_RELAXED);
                  for (int i = 0; i < width; ++i) __atomic_store_n(f + i, uint8_t(good >> (8 * i)), __ATOMIC_RELAXED);
              }
          }) {}
    ~Flipper() {
        stop_ = true;
        thread_.join();
    }

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// Counts outcomes; done() once both an OK and a refusal were seen and `min` rounds ran.
struct Outcomes {
    int ok = 0, refused = 0, rounds = 0;
    std::string failure;
    bool more(int min) const { return failure.empty() && rounds < kMaxDecodes && (rounds < min || !ok || !refused); }
    void check() const {
        CPPUNIT_ASSERT_MESSAGE(failure, failure.empty());
        CPPUNIT_ASSERT_MESSAGE("no race seen in " + std::to_string(rounds) + " rounds: " + std::to_string(ok) +
                                   " OK, " + std::to_string(refused) + " refused",
                               ok > 0 && refused > 0);
    }
};

// One memfd mapped twice: `reader` (read-only, a PROT_NONE page after it, the packet ending
// right before that page) and `writer` (read-write, the same bytes at another address).
class TwoMappings {
public:
    explicit TwoMappings(const Bytes &packet) {
        const size_t page = size_t(::sysconf(_SC_PAGESIZE));
        size_ = (packet.size() + page - 1) / page * page;
        fd_ = ::memfd_create("tenso-race", MFD_CLOEXEC);
        if (fd_ < 0 || ::ftruncate(fd_, off_t(size_)) != 0) throw std::runtime_error("memfd");
        void *w = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        void *r = ::mmap(nullptr, size_ + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (w == MAP_FAILED || r == MAP_FAILED) throw std::runtime_error("mmap");
        writer_ = static_cast<uint8_t *>(w);
        reserve_ = static_cast<uint8_t *>(r);
        if (::mmap(reserve_, size_, PROT_READ, MAP_SHARED | MAP_FIXED, fd_, 0) == MAP_FAILED)
            throw std::runtime_error("mmap fixed");
        reserve_len_ = size_ + page;
        off_ = size_ - packet.size();
        std::memcpy(writer_ + off_, packet.data(), packet.size());
    }
    ~TwoMappings() {
        ::munmap(writer_, size_);
        ::munmap(reserve_, reserve_len_);
        ::close(fd_);
    }
    TwoMappings(const TwoMappings &) = delete;
    TwoMappings &operator=(const TwoMappings &) = delete;

    const uint8_t *packet() const { return reserve_ + off_; }
    const uint8_t *end() const { return reserve_ + size_; }
    uint8_t *field(size_t packet_off) { return writer_ + off_ + packet_off; }

private:
    int fd_ = -1;
    size_t size_ = 0, reserve_len_ = 0, off_ = 0;
    uint8_t *writer_ = nullptr, *reserve_ = nullptr;
};

// Decodes `packet` at least kDecodes times, and until both outcomes were seen, while a thread
// flips the little-endian field of `width` bytes at `field_off` between `good` and `bad`. Each
// result must be one of `allowed`; `check` inspects each OK view.
template <class Check>
void race(const Bytes &packet, size_t field_off, int width, uint64_t good, uint64_t bad,
          const std::set<tenso_status> &allowed, Check check) {
    TwoMappings m(packet);
    Outcomes n;
    {
        Flipper flip(m.field(field_off), width, good, bad);
        for (; n.more(kDecodes); ++n.rounds) {
            tenso_view *v = nullptr;
            tenso_status st = tenso_loads(&v, m.packet(), packet.size(), nullptr);
            if (!allowed.count(st)) n.failure = "decode " + std::to_string(n.rounds) + ": " + tenso_describe(st);
            else if (st == TENSO_OK) {
                ++n.ok;
                n.failure = check(v, m.packet(), m.end());
            } else ++n.refused;
            tenso_view_free(v);
        }
    }
    n.check();
}

}  // namespace

class CapiDecodeRaceTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiDecodeRaceTest);
    CPPUNIT_TEST(testNumScalesRewritten);
    CPPUNIT_TEST(testStringOffsetsRewritten);
    CPPUNIT_TEST(testCacheSpaceRewritten);
    CPPUNIT_TEST(testArchiveSlotRewritten);
    CPPUNIT_TEST_SUITE_END();

public:
    // qint8 [4], per tensor: num_scales flips between 1 and 16M (128 MiB of scales).
    void testNumScalesRewritten() {
        Bytes p = Pkt()
                      .v4(0, TENSO_DTYPE_QINT8, 1)
                      .u32(4)
                      .u8(TENSO_QUANT_PER_TENSOR)
                      .u8(0)
                      .u32(0)
                      .u32(1)
                      .u32(0x3F800000)  // scale 1.0
                      .u32(0)           // zero point 0.0
                      .raw(Bytes{1, 2, 3, 4});
        const size_t num_scales_off = 10 + 4 + 6;
        race(p, num_scales_off, 4, 1, 1u << 24, {TENSO_OK, TENSO_E_MALFORMED},
             [](const tenso_view *v, const uint8_t *, const uint8_t *) -> std::string {
                 tenso_quantized q;
                 if (tenso_view_quantized(&q, v) != TENSO_OK) return "not quantized";
                 if (q.num_scales != 1) return "num_scales " + std::to_string(q.num_scales);
                 return "";
             });
    }

    // Two strings "abc", "def": the last offset flips between 6 and 2^40.
    void testStringOffsetsRewritten() {
        Bytes p = Pkt().v4(TENSO_FLAG_STRING, TENSO_DTYPE_STRING, 1).u32(2).u64(0).u64(3).u64(6).str("abcdef");
        const size_t last_offset_off = 10 + 4 + 16;
        race(p, last_offset_off, 8, 6, uint64_t(1) << 40, {TENSO_OK, TENSO_E_MALFORMED, TENSO_E_TOO_MANY_ELEMENTS},
             [](const tenso_view *v, const uint8_t *, const uint8_t *end) -> std::string {
                 const uint64_t *offs;
                 const char *payload;
                 if (tenso_view_string_offsets(&offs, &payload, v) != TENSO_OK) return "not strings";
                 const uint64_t n = tenso_view_nbytes(v);
                 if (n != 6 || offs[2] != 6 || reinterpret_cast<const uint8_t *>(payload) + n > end)
                     return "string view of " + std::to_string(n) + " bytes, last offset " + std::to_string(offs[2]);
                 return "";
             });
    }

    // A cache entry's data_off flips between its place and 1 TiB. Get (locked, and again from
    // its parked pin without the lock), info and an in-place put check the entry's space and
    // must then use what they checked: before they did, a second read of the pool steered a
    // decode (or the put's write) to 1 TiB past the region.
    void testCacheSpaceRewritten() {
        using namespace cache_test;
        Unlink u{pool_name("race")};
        CachePtr c = create(u.name, options(256 << 10, 16));
        Val a(1, 1, 100);
        TENSO_CHECK_OK(tenso_cache_put(nullptr, c.get(), "a", 1, a.value.get(), nullptr, 0));
        RawPool r(u.name);
        const size_t entry = size_t(r.get<uint64_t>(kEntriesOff));  // slot 0 holds "a"
        const uint64_t off = r.get<uint64_t>(entry + kEntryDataOff);
        Outcomes n;
        {
            Flipper flip(r.p + entry + kEntryDataOff, 8, off, uint64_t(1) << 40);
            for (; n.more(kDecodes / 20); ++n.rounds) {
                tenso_view *v = nullptr;
                tenso_cache_entry_info info;
                const tenso_status got = tenso_cache_get(&v, c.get(), "a", 1, nullptr);
                if (got == TENSO_OK) n.failure = verify(v, 1);
                tenso_view_free(v);
                // Again: served from the pin the free parked, checked without the lock.
                v = nullptr;
                const tenso_status quiet = tenso_cache_get(&v, c.get(), "a", 1, nullptr);
                if (quiet == TENSO_OK && !verify(v, 1).empty()) n.failure = "quiet hit: " + verify(v, 1);
                tenso_view_free(v);
                const tenso_status inspected = tenso_cache_info(&info, c.get(), "a", 1);
                const tenso_status put = tenso_cache_put(nullptr, c.get(), "a", 1, a.value.get(), nullptr, 0);
                for (tenso_status st : {got, quiet, inspected, put}) {
                    if (st == TENSO_OK) ++n.ok;
                    else if (st == TENSO_E_CORRUPT) ++n.refused;
                    else n.failure = std::string("round ") + std::to_string(n.rounds) + ": " + tenso_describe(st);
                }
            }
        }
        n.check();
        r.set<uint64_t>(entry + kEntryDataOff, off);
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
    }

    // The slot naming an archive's first entry flips between 1 and 0xFFFFFFFF in the file. Open
    // checked the slots in one pass and probed them again in another, where a slot read as
    // 0xFFFFFFFF indexed the entry table 4 billion entries past its end. (1024 entries: the
    // passes lie far enough apart for the slot to change between them.)
    void testArchiveSlotRewritten() {
        using namespace arch;
        const std::string dir = make_scratch("CapiDecodeRaceTest"), path = dir + "/many.tenso";
        Tens t(TENSO_DTYPE_FLOAT32, {4}, 1);
        WriterPtr w = writer(path, write_opts(0, 64));
        for (int i = 0; i < 1024; ++i) add_tensor(w.get(), "t" + std::to_string(i), t.t);
        TENSO_CHECK_OK(tenso_archive_writer_finish(w.get()));
        const Bytes file = slurp(path);
        const Layout L(file);
        size_t slot = size_t(L.table_at);
        while (rd(file, slot, 4) != 1) slot += 4;
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        void *m = ::mmap(nullptr, file.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CPPUNIT_ASSERT(fd >= 0 && m != MAP_FAILED);
        Outcomes n;
        {
            Flipper flip(static_cast<uint8_t *>(m) + slot, 4, 1, 0xFFFFFFFF);
            for (; n.more(kDecodes / 500); ++n.rounds) {
                const tenso_status st = open_status(path);
                if (st == TENSO_OK) ++n.ok;
                else if (st == TENSO_E_CORRUPT) ++n.refused;
                else n.failure = "open " + std::to_string(n.rounds) + ": " + tenso_describe(st);
            }
        }
        ::munmap(m, file.size());
        ::close(fd);
        remove_dir(dir);
        n.check();
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiDecodeRaceTest);
