// tenso verify FILE... - checks every stored hash and integrity footer, and that every packet
// decodes. One "FILE: OK" / "FILE: FAILED" line per file on stdout (details on stderr).
#include "cli.hpp"
#include "json.hpp"
#include "source.hpp"

#include <algorithm>
#include <cstdio>

namespace cli {

namespace {

const char kVerifyHelp[] =
    "usage: tenso verify [--json] [-q] FILE...\n"
    "\n"
    "Verifies tenso archives (every stored XXH3 and that every packet decodes), safetensors and\n"
    "bintensors files (index, and hashes where stored) and packet files (every packet decoded,\n"
    "integrity footers checked). Prints 'FILE: OK' or 'FILE: FAILED' per file; the reason, with\n"
    "the failing tensor, goes to stderr.\n"
    "\n"
    "  --json       one JSON document: {\"tenso_version\", \"ok\", \"files\": [...]}\n"
    "  -q, --quiet  no progress bar, no OK lines (failures are still reported)\n"
    "  -h, --help\n"
    "\n"
    "Exit status: 0 every file verified, 1 a file failed verification, 3 a file could not be\n"
    "read; with several files, the highest.\n";

}  // namespace

int cmd_verify(int argc, char **argv) {
    ArgSpec spec;
    spec.options = {"--json", "--quiet"};
    spec.aliases = {{"-q", "--quiet"}};
    spec.min_positional = 1;
    Args args;
    if (!parse_args(args, spec, "verify", argc, argv, 2)) return kExitUsage;
    if (args.has("--help")) {
        std::fputs(kVerifyHelp, stdout);
        return kExitOk;
    }
    bool json = args.has("--json"), quiet = args.has("--quiet");
    JsonWriter j(stdout);
    if (json) {
        j.begin_object();
        j.key("tenso_version").value(tenso_version_string());
        j.key("files").begin_array();
    }
    int rc = kExitOk;
    for (const std::string &path : args.positional) {
        std::string format;
        uint64_t tensors = 0;
        double t0 = now_seconds();
        try {
            Source src(path, TENSO_FORMAT_AUTO);
            format = tenso_format_name(src.format());
            Progress progress("verify " + path, src.file_size(), !json && !quiet);
            tensors = src.verify(progress);
            progress.finish();
            if (json) {
                j.begin_object();
                j.key("file").value(path);
                j.key("format").value(format);
                j.key("ok").value(true);
                j.key("tensors").value(tensors);
                j.key("seconds").value(now_seconds() - t0);
                j.end_object();
            } else if (!quiet) {
                std::printf("%s: OK\n", printable(path.data(), path.size()).c_str());
            }
        } catch (const Failure &f) {
            rc = std::max(rc, report(path, f));
            if (json) {
                j.begin_object();
                j.key("file").value(path);
                if (!format.empty()) j.key("format").value(format);
                j.key("ok").value(false);
                json_error(j, f);
                j.end_object();
            } else {
                std::printf("%s: FAILED\n", printable(path.data(), path.size()).c_str());
            }
        }
        std::fflush(stdout);
    }
    if (json) {
        j.end_array();
        j.key("ok").value(rc == kExitOk);
        j.end_object();
        j.finish();
    }
    return rc;
}

}  // namespace cli
