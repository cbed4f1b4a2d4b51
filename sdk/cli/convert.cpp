// tenso convert IN OUT - rewrites the tensors of a tenso archive, safetensors, bintensors or
// packet file as a tenso archive, safetensors or bintensors file. Tensors are read as views
// into the input's mapping and handed to the archive writer as values that borrow those bytes,
// one at a time: nothing is copied in between, and memory stays bounded whatever the size.
#include "cli.hpp"
#include "json.hpp"
#include "source.hpp"

#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <memory>

namespace cli {

namespace {

const char kConvertHelp[] =
    "usage: tenso convert [options] IN OUT\n"
    "\n"
    "Converts between tenso archives (.tenso), safetensors (.safetensors) and bintensors (.bt);\n"
    "files of Tenso packets (.tnso, or a .tenso holding one packet) are accepted as input, a\n"
    "bundle's entries becoming the tensors. Formats come from the extensions (the input's from\n"
    "its content) unless given; metadata is carried over. OUT is replaced atomically.\n"
    "\n"
    "  --to FORMAT        tenso | safetensors | bt (default: from OUT's extension, else tenso)\n"
    "  --from FORMAT      tenso | safetensors | bt | packet (default: detected)\n"
    "  --alignment N      tenso archives: 64 (default) or 4096 (O_DIRECT, GPUDirect Storage)\n"
    "  --integrity        tenso archives: XXH3 footer on every packet\n"
    "  --compress         tenso archives: LZ4-compress dense tensors\n"
    "  --no-hash          tenso archives: no XXH3 per tensor in the index\n"
    "  --json             the summary as one JSON document on stdout (errors too, with exit codes)\n"
    "  -q, --quiet        no progress bar or summary\n"
    "  -h, --help\n";

struct ValueFree {
    void operator()(tenso_value *v) const { tenso_value_free(v); }
};
using ValuePtr = std::unique_ptr<tenso_value, ValueFree>;

tenso_tensor tensor_of(const tenso_view *v) {
    return tenso_tensor{tenso_view_data(v), tenso_view_nbytes(v), tenso_view_shape(v), tenso_view_ndim(v),
                        tenso_view_dtype(v)};
}

// A value describing the same thing as `v`, borrowing v's memory (valid while v is).
ValuePtr value_from_view(const tenso_view *v) {
    tenso_value *out = nullptr;
    tenso_kind kind = tenso_view_kind(v);
    switch (kind) {
    case TENSO_KIND_DENSE: {
        tenso_tensor t = tensor_of(v);
        check(tenso_value_new_tensor(&out, &t));
        break;
    }
    case TENSO_KIND_BUNDLE: {
        check(tenso_value_new_bundle(&out));
        ValuePtr bundle(out);
        for (uint32_t i = 0, n = tenso_view_bundle_count(v); i < n; ++i) {
            const char *key;
            size_t key_len;
            const tenso_view *child;
            check(tenso_view_bundle_entry(&key, &key_len, &child, v, i));
            ValuePtr c = value_from_view(child);
            check(tenso_bundle_insert(bundle.get(), key, key_len, c.get()));  // copies c's description
        }
        return bundle;
    }
    case TENSO_KIND_SPARSE_COO:
    case TENSO_KIND_SPARSE_CSR:
    case TENSO_KIND_SPARSE_CSC: {
        tenso_tensor parts[3];
        for (uint32_t c = 0; c < 3; ++c) {
            const tenso_view *comp;
            check(tenso_view_component(&comp, v, c));
            parts[c] = tensor_of(comp);
        }
        check(tenso_value_new_sparse(&out, kind, tenso_view_ndim(v), tenso_view_shape(v), &parts[0], &parts[1],
                                     &parts[2]));
        break;
    }
    case TENSO_KIND_QUANTIZED: {
        tenso_quantized q;
        check(tenso_view_quantized(&q, v));
        check(tenso_value_new_quantized(&out, &q));
        break;
    }
    case TENSO_KIND_STRING: {
        const uint64_t *offsets;
        const char *payload;
        check(tenso_view_string_offsets(&offsets, &payload, v));
        uint64_t count = tenso_view_ndim(v) == 1 ? tenso_view_shape(v)[0] : 0;
        check(tenso_value_new_strings(&out, count, offsets, payload, offsets[count]));
        break;
    }
    case TENSO_KIND_GPU_IPC_REF: {
        tenso_ipc_ref ref;
        check(tenso_view_ipc_ref(&ref, v));
        check(tenso_value_new_ipc_ref(&out, &ref));
        break;
    }
    default:
        // Direct ragged packets (and kinds newer than this tool) have no value constructor.
        fail(TENSO_E_UNSUPPORTED_KIND, "a " + kind_name(kind) + " packet cannot be re-encoded");
    }
    return ValuePtr(out);
}

struct WriterFree {
    void operator()(tenso_archive_writer *w) const { tenso_archive_writer_free(w); }
};

tenso_format format_from_extension(const std::string &path) {
    auto ends_with = [&path](const char *ext) {
        std::string e(ext);
        return path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
    };
    if (ends_with(".safetensors")) return TENSO_FORMAT_SAFETENSORS;
    if (ends_with(".bt")) return TENSO_FORMAT_BINTENSORS;
    return TENSO_FORMAT_ARCHIVE;
}

}  // namespace

int cmd_convert(int argc, char **argv) {
    ArgSpec spec;
    spec.options = {"--to=", "--from=", "--alignment=", "--integrity", "--compress", "--no-hash", "--json", "--quiet"};
    spec.aliases = {{"-q", "--quiet"}};
    spec.min_positional = 2;
    spec.max_positional = 2;
    Args args;
    if (!parse_args(args, spec, "convert", argc, argv, 2)) return kExitUsage;
    if (args.has("--help")) {
        std::fputs(kConvertHelp, stdout);
        return kExitOk;
    }
    const std::string &in = args.positional[0], &out = args.positional[1];

    tenso_format from = TENSO_FORMAT_AUTO, to = format_from_extension(out);
    if (args.has("--from") && !parse_format(from, args.get("--from")))
        return usage_error("convert", "unknown input format '" + args.get("--from") + "'");
    if (args.has("--to") && (!parse_format(to, args.get("--to")) || to == TENSO_FORMAT_PACKET))
        return usage_error("convert", "unknown output format '" + args.get("--to") + "'");
    tenso_archive_write_options wopts = TENSO_ARCHIVE_WRITE_OPTIONS_INIT;
    wopts.format = to;
    if (args.has("--alignment")) {
        std::string a = args.get("--alignment");
        if (a != "64" && a != "4096") return usage_error("convert", "--alignment must be 64 or 4096, not '" + a + "'");
        wopts.alignment = a == "64" ? 64u : 4096u;
    }
    if (args.has("--integrity")) wopts.encode.flags |= TENSO_ENCODE_INTEGRITY;
    if (args.has("--compress")) wopts.encode.flags |= TENSO_ENCODE_COMPRESS;
    if (args.has("--no-hash")) wopts.flags |= TENSO_ARCHIVE_NO_HASH;
    if (to != TENSO_FORMAT_ARCHIVE) {
        for (const char *opt : {"--alignment", "--integrity", "--compress", "--no-hash"})
            if (args.has(opt))
                return usage_error("convert",
                                   std::string(opt) + " applies to tenso archives only, not " + tenso_format_name(to));
    }
    const bool json = args.has("--json"), quiet = args.has("--quiet");
    const double start = now_seconds();
    tenso_format in_format = TENSO_FORMAT_AUTO;
    uint64_t in_size = 0, out_size = 0, count = 0, nbytes = 0;
    // --json: one document whatever happens, the error object (and the exit code) on failure.
    auto emit_json = [&](const Failure *f) {
        JsonWriter j(stdout);
        j.begin_object();
        j.key("tenso_version").value(tenso_version_string());
        j.key("ok").value(f == nullptr);
        j.key("input").value(in);
        j.key("input_format").value(in_format ? tenso_format_name(in_format) : "unknown");
        j.key("input_bytes").value(in_size);
        j.key("output").value(out);
        j.key("output_format").value(tenso_format_name(to));
        if (!f) j.key("output_bytes").value(out_size);
        j.key("tensors").value(count);
        j.key("dense_bytes").value(nbytes);
        j.key("seconds").value(now_seconds() - start);
        if (f) json_error(j, *f);
        j.end_object();
        j.finish();
    };

    const std::string *blame = &in;  // which file a failure is reported against
    try {
        Source src(in, from);
        in_format = src.format();
        in_size = src.file_size();
        blame = &out;
        tenso_archive_writer *raw = nullptr;
        check(tenso_archive_writer_open(&raw, out.c_str(), &wopts));
        std::unique_ptr<tenso_archive_writer, WriterFree> writer(raw);
        for (const auto &kv : src.metadata())
            check(tenso_archive_writer_set_metadata(writer.get(), kv.first.data(), kv.first.size(), kv.second.data(),
                                                    kv.second.size()),
                  "metadata \"" + kv.first + "\"");

        Progress progress("convert", src.file_size(), !quiet && !json);
        uint64_t done = 0;
        blame = &in;
        src.for_each([&](const std::string &name, const tenso_view *v, uint64_t stored) {
            ValuePtr value;
            try {
                value = value_from_view(v);
            } catch (Failure &f) {
                f.tensor = name;
                throw;
            }
            blame = &out;
            tenso_status st = tenso_archive_writer_add(writer.get(), name.data(), name.size(), value.get());
            if (st != TENSO_OK) throw Failure{st, tenso_last_error(), name};
            blame = &in;
            ++count;
            if (tenso_view_kind(v) == TENSO_KIND_DENSE) nbytes += tenso_view_nbytes(v);
            done += stored;
            progress.update(done);
        });
        blame = &out;
        check(tenso_archive_writer_finish(writer.get()));
        progress.finish();
        struct stat sb;
        out_size = ::stat(out.c_str(), &sb) == 0 ? static_cast<uint64_t>(sb.st_size) : 0;
        if (json) {
            emit_json(nullptr);
        } else if (!quiet) {
            std::printf("%s (%s, %s) -> %s (%s, %s): %" PRIu64 " tensor%s, %s of dense data\n",
                        printable(in.data(), in.size()).c_str(), tenso_format_name(src.format()),
                        human_bytes(src.file_size()).c_str(), printable(out.data(), out.size()).c_str(),
                        tenso_format_name(to), human_bytes(out_size).c_str(), count, count == 1 ? "" : "s",
                        human_bytes(nbytes).c_str());
        }
    } catch (const Failure &f) {
        if (json) emit_json(&f);
        return report(*blame, f);
    }
    return kExitOk;
}

}  // namespace cli
