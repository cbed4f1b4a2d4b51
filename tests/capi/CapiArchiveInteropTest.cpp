// CapiArchiveInteropTest - safetensors and bintensors: the golden files the real packages wrote
// (tests/vectors/archive, see make_archive_vectors.py) read back value for value, tenso's
// writers reproducing those files byte for byte from the same tensors, round trips of every
// dtype each format has, and the canonical tensor order.
#include <cppunit/extensions/HelperMacros.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "CapiArchiveUtil.hpp"

using namespace arch;
using hostile::Bytes;
using hostile::ViewPtr;

namespace {

const std::map<std::string, tenso_dtype> kNames = {
    {"BOOL", TENSO_DTYPE_BOOL},     {"U8", TENSO_DTYPE_UINT8},      {"I8", TENSO_DTYPE_INT8},
    {"I16", TENSO_DTYPE_INT16},     {"U16", TENSO_DTYPE_UINT16},    {"F16", TENSO_DTYPE_FLOAT16},
    {"BF16", TENSO_DTYPE_BFLOAT16}, {"I32", TENSO_DTYPE_INT32},     {"U32", TENSO_DTYPE_UINT32},
    {"F32", TENSO_DTYPE_FLOAT32},   {"C64", TENSO_DTYPE_COMPLEX64}, {"F64", TENSO_DTYPE_FLOAT64},
    {"I64", TENSO_DTYPE_INT64},     {"U64", TENSO_DTYPE_UINT64}};

std::string dir() { return hostile::vectors_dir() + "/archive"; }

nlohmann::json manifest() {
    std::ifstream f(dir() + "/manifest.json");
    return nlohmann::json::parse(f);
}

Bytes unhex(const std::string &h) {
    Bytes b;
    for (size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(uint8_t(std::stoi(h.substr(i, 2), nullptr, 16)));
    return b;
}

// A tensor of the manifest, with its bytes.
struct Expected {
    std::string name;
    tenso_dtype dtype;
    std::vector<uint64_t> shape;
    Bytes bytes;
    tenso_tensor t() const { return hostile::tensor(bytes.data(), bytes.size(), shape, dtype); }
};

std::vector<Expected> expected(const nlohmann::json &file) {
    std::vector<Expected> out;
    for (auto it = file.at("tensors").begin(); it != file.at("tensors").end(); ++it)
        out.push_back(Expected{it.key(), kNames.at(it->at("dtype").get<std::string>()),
                               it->at("shape").get<std::vector<uint64_t>>(), unhex(it->at("hex").get<std::string>())});
    return out;
}

}  // namespace

class CapiArchiveInteropTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiArchiveInteropTest);
    CPPUNIT_TEST(testGoldenFilesRead);
    CPPUNIT_TEST(testWritersReproduceGoldenBytes);
    CPPUNIT_TEST(testRoundTripEveryDtype);
    CPPUNIT_TEST_SUITE_END();

    std::string scratch_;

public:
    void setUp() override { scratch_ = hostile::make_scratch("CapiArchiveInteropTest"); }
    void tearDown() override { hostile::remove_dir(scratch_); }

    void testGoldenFilesRead() {
        nlohmann::json m = manifest();
        for (auto f = m.at("files").begin(); f != m.at("files").end(); ++f) {
            const std::string path = dir() + "/" + f.key();
            ArchivePtr a = open_ok(path);
            bool bt = f.key().size() > 3 && f.key().compare(f.key().size() - 3, 3, ".bt") == 0;
            CPPUNIT_ASSERT_EQUAL(int(bt ? TENSO_FORMAT_BINTENSORS : TENSO_FORMAT_SAFETENSORS),
                                 int(tenso_archive_format(a.get())));
            CPPUNIT_ASSERT_EQUAL(0u, tenso_archive_alignment(a.get()));  // the format promises none
            std::vector<Expected> ex = expected(*f);
            CPPUNIT_ASSERT_EQUAL(uint64_t(ex.size()), tenso_archive_count(a.get()));
            uint64_t prev = 0;
            for (const Expected &e : ex) {
                uint64_t i = find(a.get(), e.name);
                tenso_archive_entry en = entry(a.get(), i);
                CPPUNIT_ASSERT_EQUAL(en.offset, en.data_offset);
                CPPUNIT_ASSERT_EQUAL(0u, en.flags);
                same_tensor(get(a.get(), i).get(), e.t(), f.key() + ":" + e.name);
                Bytes got(e.bytes.size());
                TENSO_CHECK_OK(tenso_archive_read(got.data(), a.get(), i, 0, got.size()));
                CPPUNIT_ASSERT(got == e.bytes);
            }
            for (uint64_t i = 0; i < tenso_archive_count(a.get()); ++i) {  // file order
                tenso_archive_entry en = entry(a.get(), i);
                CPPUNIT_ASSERT(en.offset >= prev);
                prev = en.offset + en.stored_bytes;
            }
            CPPUNIT_ASSERT_EQUAL(uint64_t(hostile::slurp(path).size()), prev);
            auto meta = f->at("metadata");
            CPPUNIT_ASSERT_EQUAL(uint64_t(meta.size()), tenso_archive_metadata_count(a.get()));
            for (auto kv = meta.begin(); kv != meta.end(); ++kv) {
                const char *v;
                size_t vl;
                TENSO_CHECK_OK(tenso_archive_metadata_find(&v, &vl, a.get(), kv.key().data(), kv.key().size()));
                CPPUNIT_ASSERT_EQUAL(kv->get<std::string>(), std::string(v, vl));
            }
            TENSO_CHECK_OK(tenso_archive_verify(nullptr, a.get(), nullptr, nullptr));
        }
    }

    // Same tensors and metadata in, the reference packages' exact bytes out: header encoding,
    // padding, canonical order and data all agree.
    void testWritersReproduceGoldenBytes() {
        nlohmann::json m = manifest();
        for (auto f = m.at("files").begin(); f != m.at("files").end(); ++f) {
            const std::string out = scratch_ + "/" + f.key();
            std::vector<Expected> ex = expected(*f);
            {
                WriterPtr w = writer(out, write_opts());  // format from the extension
                auto meta = f->at("metadata");
                for (auto kv = meta.begin(); kv != meta.end(); ++kv) {
                    std::string v = kv->get<std::string>();
                    TENSO_CHECK_OK(tenso_archive_writer_set_metadata(w.get(), kv.key().data(), kv.key().size(),
                                                                     v.data(), v.size()));
                }
                for (size_t i = ex.size(); i-- > 0;) {  // any order in: canonical order out
                    tenso_tensor t = ex[i].t();
                    add_tensor(w.get(), ex[i].name, t);
                }
                TENSO_CHECK_OK(tenso_archive_writer_finish(w.get()));
            }
            CPPUNIT_ASSERT_MESSAGE(f.key(), hostile::slurp(out) == hostile::slurp(dir() + "/" + f.key()));
        }
    }

    void testRoundTripEveryDtype() {
        for (tenso_format fmt : {TENSO_FORMAT_SAFETENSORS, TENSO_FORMAT_BINTENSORS}) {
            const std::string path = scratch_ + (fmt == TENSO_FORMAT_SAFETENSORS ? "/all.safetensors" : "/all.bt");
            std::vector<std::unique_ptr<Tens>> ts;
            std::vector<std::string> names;
            for (const auto &kv : kNames) {
                if (fmt == TENSO_FORMAT_BINTENSORS && kv.second == TENSO_DTYPE_COMPLEX64) continue;
                ts.emplace_back(new Tens(kv.second, {3, 3}, uint8_t(kv.second)));
                names.push_back("x." + kv.first);
            }
            ts.emplace_back(new Tens(TENSO_DTYPE_FLOAT32, {}, 1));
            names.push_back("scalar");
            ts.emplace_back(new Tens(TENSO_DTYPE_INT64, {2, 0}, 1));
            names.push_back("empty");
            {
                WriterPtr w = writer(path, write_opts(fmt));
                for (size_t i = 0; i < ts.size(); ++i) add_tensor(w.get(), names[i], ts[i]->t);
                TENSO_CHECK_OK(tenso_archive_writer_set_metadata(w.get(), "ключ", 8, "значение", 16));
                TENSO_CHECK_OK(tenso_archive_writer_finish(w.get()));
            }
            ArchivePtr a = open_ok(path);
            CPPUNIT_ASSERT_EQUAL(int(fmt), int(tenso_archive_format(a.get())));
            for (size_t i = 0; i < ts.size(); ++i) {
                uint64_t k = find(a.get(), names[i]);
                tenso_archive_entry e = entry(a.get(), k);
                // 8-aligned header and larger dtypes first keep every tensor dtype-aligned
                CPPUNIT_ASSERT_EQUAL(uint64_t(0), e.offset % std::min<uint64_t>(8, tenso_dtype_itemsize(e.dtype)));
                same_tensor(get(a.get(), k).get(), ts[i]->t, names[i]);
            }
            size_t prev = 100;
            for (uint64_t i = 0; i < tenso_archive_count(a.get()); ++i) {  // canonical: itemsize never grows
                size_t s = tenso_dtype_itemsize(entry(a.get(), i).dtype);
                CPPUNIT_ASSERT(s <= prev);
                prev = s;
            }
            const char *v;
            size_t vl;
            TENSO_CHECK_OK(tenso_archive_metadata_find(&v, &vl, a.get(), "ключ", 8));
            CPPUNIT_ASSERT_EQUAL(std::string("значение"), std::string(v, vl));
        }
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiArchiveInteropTest);
