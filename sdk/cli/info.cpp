// tenso info FILE... - what a file holds, from its index or headers (no tensor data is read
// except to decode packet files' structure).
#include "cli.hpp"
#include "json.hpp"
#include "source.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace cli {

namespace {

const char kInfoHelp[] =
    "usage: tenso info [--json] FILE...\n"
    "\n"
    "Describes tenso archives, safetensors and bintensors files, and files of Tenso packets:\n"
    "the format, every tensor (name, kind, dtype, shape, stored bytes, file offset, alignment\n"
    "of the body's file offset, flags), the metadata and totals. Only headers and indexes are\n"
    "read; use 'tenso verify' to check the data.\n"
    "\n"
    "  --json   one JSON document: {\"tenso_version\", \"files\": [...]}\n"
    "  -h, --help\n";

struct Totals {
    uint64_t tensors = 0, nbytes = 0, stored = 0;
};

Totals totals_of(const std::vector<TensorInfo> &rows) {
    Totals t;
    for (const TensorInfo &r : rows) {
        if (r.kind == TENSO_KIND_BUNDLE) continue;  // its entries are counted instead
        ++t.tensors;
        t.nbytes += r.nbytes;
        t.stored += r.stored_bytes;
    }
    return t;
}

const char *dtype_label(const TensorInfo &r) {
    if (r.kind == TENSO_KIND_BUNDLE || r.kind == TENSO_KIND_GPU_IPC_REF || r.dtype == 0) return nullptr;
    return tenso_dtype_name(r.dtype);
}

std::string flags_label(const TensorInfo &r) {
    std::string s;
    auto add = [&s](bool on, const char *name) {
        if (!on) return;
        if (!s.empty()) s += ',';
        s += name;
    };
    add(r.integrity, "integrity");
    add(r.compressed, "compressed");
    add(r.hashed, "hashed");
    return s.empty() ? "-" : s;
}

void print_table(const std::string &path, const Source &src, const std::vector<TensorInfo> &rows,
                 const std::vector<std::pair<std::string, std::string>> &meta) {
    Totals tot = totals_of(rows);
    const std::string aligned = src.alignment() ? ", aligned to " + std::to_string(src.alignment()) : "";
    std::printf("%s: %s%s, %" PRIu64 " tensor%s, %s of data, file %s\n", printable(path.data(), path.size()).c_str(),
                tenso_format_name(src.format()), aligned.c_str(), tot.tensors, tot.tensors == 1 ? "" : "s",
                human_bytes(tot.nbytes).c_str(), human_bytes(src.file_size()).c_str());
    std::vector<std::vector<std::string>> cells;
    cells.push_back({"NAME", "KIND", "DTYPE", "SHAPE", "STORED", "OFFSET", "ALIGN", "FLAGS"});
    // Nested bundle entries are indented under their bundle.
    uint32_t base_depth = UINT32_MAX;
    for (const TensorInfo &r : rows) base_depth = std::min(base_depth, r.depth);
    for (const TensorInfo &r : rows) {
        const char *dt = dtype_label(r);
        std::string shape =
            r.kind == TENSO_KIND_BUNDLE ? std::to_string(r.entries) + " entries" : shape_string(r.shape, r.ndim);
        cells.push_back({std::string(2 * (r.depth - base_depth), ' ') + printable(r.name.data(), r.name.size()),
                         kind_name(r.kind), dt ? dt : "-", shape, std::to_string(r.stored_bytes),
                         r.has_offset ? std::to_string(r.offset) : "-",
                         r.has_body ? std::to_string(offset_alignment(r.body_offset)) : "-", flags_label(r)});
    }
    std::vector<size_t> width(cells[0].size(), 0);
    for (const auto &row : cells)
        for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    for (const auto &row : cells) {
        std::string line = " ";
        for (size_t c = 0; c < row.size(); ++c) {
            bool numeric = c == 4 || c == 5 || c == 6;
            std::string pad(width[c] - row[c].size(), ' ');
            line += ' ';
            line += numeric ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : "");
        }
        std::printf("%s\n", line.c_str());
    }
    std::printf("  total: %" PRIu64 " tensor%s, %" PRIu64 " bytes of data, %" PRIu64 " stored, file %" PRIu64 "\n",
                tot.tensors, tot.tensors == 1 ? "" : "s", tot.nbytes, tot.stored, src.file_size());
    if (!meta.empty()) {
        std::printf("  metadata:\n");
        for (const auto &kv : meta)
            std::printf("    %s = %s\n", printable(kv.first.data(), kv.first.size()).c_str(),
                        printable(kv.second.data(), kv.second.size()).c_str());
    }
}

void write_json(JsonWriter &j, const std::string &path, const Source &src, const std::vector<TensorInfo> &rows,
                const std::vector<std::pair<std::string, std::string>> &meta) {
    j.begin_object();
    j.key("file").value(path);
    j.key("format").value(tenso_format_name(src.format()));
    if (src.alignment()) j.key("alignment").value(src.alignment());
    else j.key("alignment").null();
    j.key("file_size").value(src.file_size());
    j.key("tensors").begin_array();
    for (const TensorInfo &r : rows) {
        j.begin_object();
        j.key("name").value(r.name);
        if (r.packet >= 0) j.key("packet").value(r.packet);
        j.key("depth").value(r.depth);
        j.key("kind").value(kind_name(r.kind));
        j.key("dtype");
        if (const char *dt = dtype_label(r)) j.value(dt);
        else j.null();
        j.key("shape").begin_array();
        for (uint32_t d = 0; d < r.ndim; ++d) j.value(r.shape[d]);
        j.end_array();
        if (r.kind == TENSO_KIND_BUNDLE) j.key("entries").value(r.entries);
        j.key("nbytes").value(r.nbytes);
        j.key("stored_bytes").value(r.stored_bytes);
        j.key("offset");
        if (r.has_offset) j.value(r.offset);
        else j.null();
        j.key("body_offset");
        if (r.has_body) j.value(r.body_offset);
        else j.null();
        j.key("alignment");
        if (r.has_body) j.value(offset_alignment(r.body_offset));
        else j.null();
        j.key("flags").begin_object();
        j.key("integrity").value(r.integrity);
        j.key("compressed").value(r.compressed);
        j.key("hashed").value(r.hashed);
        j.end_object();
        if (r.hashed) {
            char hex[17];
            std::snprintf(hex, sizeof hex, "%016" PRIx64, r.xxh3);
            j.key("xxh3").value(hex);
        }
        j.end_object();
    }
    j.end_array();
    j.key("metadata").begin_object();
    for (const auto &kv : meta) j.key(kv.first).value(kv.second);
    j.end_object();
    Totals tot = totals_of(rows);
    j.key("totals").begin_object();
    j.key("tensors").value(tot.tensors);
    j.key("nbytes").value(tot.nbytes);
    j.key("stored_bytes").value(tot.stored);
    j.end_object();
    j.end_object();
}

}  // namespace

int cmd_info(int argc, char **argv) {
    ArgSpec spec;
    spec.options = {"--json"};
    spec.min_positional = 1;
    Args args;
    if (!parse_args(args, spec, "info", argc, argv, 2)) return kExitUsage;
    if (args.has("--help")) {
        std::fputs(kInfoHelp, stdout);
        return kExitOk;
    }
    bool json = args.has("--json");
    JsonWriter j(stdout);
    if (json) {
        j.begin_object();
        j.key("tenso_version").value(tenso_version_string());
        j.key("files").begin_array();
    }
    int rc = kExitOk;
    bool first = true;
    for (const std::string &path : args.positional) {
        try {
            Source src(path, TENSO_FORMAT_AUTO);
            std::vector<TensorInfo> rows = src.tensors();
            auto meta = src.metadata();
            if (json) {
                write_json(j, path, src, rows, meta);
            } else {
                if (!first) std::printf("\n");
                print_table(path, src, rows, meta);
            }
            first = false;
        } catch (const Failure &f) {
            rc = std::max(rc, report(path, f));
            if (json) {
                j.begin_object();
                j.key("file").value(path);
                json_error(j, f);
                j.end_object();
            }
        }
    }
    if (json) {
        j.end_array();
        j.end_object();
        j.finish();
    }
    std::fflush(stdout);
    return rc;
}

}  // namespace cli
