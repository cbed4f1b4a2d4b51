// tenso - the command line: info, verify, convert and bench over the public C ABI.
#include "cli.hpp"

#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

namespace {

const char kHelp[] =
    "usage: tenso [--version] [--help] COMMAND [ARGS]\n"
    "\n"
    "Tools for Tenso packets and tensor files (tenso archives, safetensors, bintensors).\n"
    "\n"
    "commands:\n"
    "  info FILE...        describe files: format, tensors, offsets, alignment, metadata\n"
    "  verify FILE...      check hashes, integrity footers and that every packet decodes\n"
    "  convert IN OUT      convert between .tenso, .safetensors and .bt (and packet files)\n"
    "  bench [FILE]        a quick benchmark of this machine and library (and of reading FILE)\n"
    "\n"
    "'tenso COMMAND --help' describes each command's options.\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  verification or data failure: corrupt or hostile file, checksum mismatch, a tensor\n"
    "     the target format cannot hold\n"
    "  2  usage error\n"
    "  3  I/O error: file not found, permission denied, disk full\n"
    "  4  internal error (a bug) or out of memory\n"
    "Errors are printed to stderr as 'tenso: FILE: MESSAGE (TENSO_E_NAME)'.\n";

}  // namespace

int main(int argc, char **argv) {
    // A library built from other headers would misread the option structs the CLI passes.
    if (tenso_version_number() / 10000 != TENSO_VERSION_MAJOR || tenso_version_number() < TENSO_VERSION_NUMBER) {
        std::fprintf(stderr, "tenso: libtenso %s is older than the %s this tool was built with\n",
                     tenso_version_string(), TENSO_VERSION_STRING);
        return cli::kExitInternal;
    }
    if (argc < 2) return cli::usage_error("", "missing command: info, verify, convert or bench");
    std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
        std::fputs(kHelp, stdout);
        return cli::kExitOk;
    }
    if (cmd == "--version" || cmd == "-V") {
        std::printf("tenso %s (protocol v%u)\n", tenso_version_string(), tenso_protocol_version());
        return cli::kExitOk;
    }
    try {
        if (cmd == "info") return cli::cmd_info(argc, argv);
        if (cmd == "verify") return cli::cmd_verify(argc, argv);
        if (cmd == "convert") return cli::cmd_convert(argc, argv);
        if (cmd == "bench") return cli::cmd_bench(argc, argv);
    } catch (const cli::Failure &f) {
        return cli::report("", f);
    } catch (const std::bad_alloc &) {
        std::fprintf(stderr, "tenso: out of memory\n");
        return cli::kExitInternal;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tenso: internal error: %s\n", e.what());
        return cli::kExitInternal;
    }
    return cli::usage_error("", cmd[0] == '-' ? "unknown option '" + cmd + "'" : "unknown command '" + cmd + "'");
}
