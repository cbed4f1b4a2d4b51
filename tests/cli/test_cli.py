#!/usr/bin/env python3
"""Tests of the `tenso` command line, run by CTest (cli.tenso).

The binary is driven as a user would drive it. Inputs come from make_inputs (packets written
through the C API), from safetensors files written here by hand, and from the CLI's own
convert; tensor bytes are checked against values recomputed here and, for safetensors, against
an independent parse of the file. Environment: TENSO_CLI, TENSO_CLI_MAKE_INPUTS,
TENSO_TEST_TMPDIR, and TENSO_TEST_EMULATOR in a cross build (the command that runs its
programs, e.g. qemu-aarch64: tests/cross/).
"""

import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

EMULATOR = shlex.split(os.environ.get("TENSO_TEST_EMULATOR", ""))
CLI = [*EMULATOR, os.environ.get("TENSO_CLI", "tenso")]
MAKE_INPUTS = [*EMULATOR, os.environ.get("TENSO_CLI_MAKE_INPUTS", "")]

# The tensors of bundle.tnso (see make_inputs.c), as little-endian bytes.
BUNDLE = {
    "weight": ("float32", [4, 8], struct.pack("<32f", *[0.25 * i for i in range(32)])),
    "bias": ("float32", [8], struct.pack("<8f", *[i - 4.0 for i in range(8)])),
    "ids": ("int32", [5], struct.pack("<5i", *[7 * i for i in range(5)])),
    "step": ("int64", [], struct.pack("<q", 42)),
}
DENSE = struct.pack("<6f", *[1.5 * i for i in range(6)])
ST_DTYPES = {"float32": "F32", "int32": "I32", "int64": "I64", "float64": "F64", "uint8": "U8"}


def run(*args, expect=0):
    p = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != expect:
        raise AssertionError(
            "tenso %s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s"
            % (" ".join(args), p.returncode, expect, p.stdout, p.stderr)
        )
    return p


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, st_dtype, shape, bytes). Written as the format requires: JSON
    header padded with spaces to 8 bytes, data offsets tiling the data section in order."""
    header, data, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def read_safetensors(path):
    """An independent parse: {name: (dtype, shape, bytes)}, metadata."""
    blob = read_bytes(path)
    (n,) = struct.unpack_from("<Q", blob)
    header = json.loads(blob[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], blob[8 + n + a : 8 + n + b])
    return out, meta


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        root = os.environ.get("TENSO_TEST_TMPDIR") or tempfile.gettempdir()
        os.makedirs(root, exist_ok=True)
        cls.dir = tempfile.mkdtemp(prefix="cli-", dir=root)
        subprocess.run([*MAKE_INPUTS, cls.dir], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def info(self, path):
        doc = json.loads(run("info", "--json", path).stdout)
        self.assertEqual(doc["tenso_version"], run("--version").stdout.split()[1])
        self.assertEqual(len(doc["files"]), 1)
        f = doc["files"][0]
        self.assertEqual(f["file"], path)
        self.assertEqual(f["file_size"], os.path.getsize(path))
        return f

    def body(self, path, t):
        """The raw body bytes of tensor row `t`, read from the file at its body offset."""
        self.assertIsNotNone(t["body_offset"], t)
        with open(path, "rb") as f:
            f.seek(t["body_offset"])
            return f.read(t["nbytes"])

    def check_bundle_tensors(self, path, fmt):
        f = self.info(path)
        self.assertEqual(f["format"], fmt)
        rows = {t["name"]: t for t in f["tensors"]}
        self.assertEqual(sorted(rows), sorted(BUNDLE))
        for name, (dtype, shape, raw) in BUNDLE.items():
            t = rows[name]
            self.assertEqual((t["kind"], t["dtype"], t["shape"], t["nbytes"]), ("dense", dtype, shape, len(raw)), name)
            self.assertEqual(self.body(path, t), raw, name)
            a = t["alignment"]
            self.assertTrue(a in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096))
            self.assertEqual(t["body_offset"] % a, 0)
            self.assertTrue(a == 4096 or (t["body_offset"] // a) % 2 == 1, t)
        self.assertEqual(f["totals"]["tensors"], 4)
        self.assertEqual(f["totals"]["nbytes"], sum(len(r) for _, _, r in BUNDLE.values()))
        return f

    # ---- help, version, usage ----

    def test_help_mentions_every_command_and_exit_code(self):
        for args in (["--help"], ["-h"], ["help"]):
            out = run(*args).stdout
            for word in ("info", "verify", "convert", "bench", "Exit status", "usage error"):
                self.assertIn(word, out)
        for cmd in ("info", "verify", "convert", "bench"):
            self.assertIn("usage: tenso " + cmd, run(cmd, "--help").stdout)
            self.assertIn("usage: tenso " + cmd, run(cmd, "-h").stdout)
        self.assertRegex(run("--version").stdout, r"^tenso \d+\.\d+\.\d+ \(protocol v4\)$")

    def test_usage_errors_exit_2(self):
        cases = [
            [],
            ["frobnicate"],
            ["--frobnicate"],
            ["info"],
            ["verify"],
            ["info", "--bogus", "x"],
            ["convert", "a"],
            ["convert", "a", "b", "c"],
            ["convert", "a", "b.tenso", "--alignment", "100"],
            ["convert", "a", "b.safetensors", "--integrity"],
            ["convert", "a", "b.bt", "--compress"],
            ["convert", "a", "b", "--to", "zip"],
            ["convert", "a", "b", "--from=zip"],
            ["convert", "a", "b", "--to"],
            ["info", "--json=yes", "x"],
            ["bench", "a", "b"],
        ]
        for args in cases:
            p = run(*args, expect=2)
            self.assertTrue(p.stderr.startswith("tenso"), p.stderr)

    def test_missing_file_exits_3(self):
        missing = self.path("no-such-file.tenso")
        for args in (
            ["info", missing],
            ["verify", missing],
            ["convert", missing, self.path("out.tenso")],
            ["info", "--json", missing],
        ):
            p = run(*args, expect=3)
            self.assertIn("tenso: %s: " % missing, p.stderr)
            self.assertIn("(TENSO_E_NOT_FOUND)", p.stderr)
        self.assertFalse(os.path.exists(self.path("out.tenso")))
        # a directory is an I/O error too
        run("info", self.dir, expect=3)

    # ---- info ----

    def test_info_dense_packet(self):
        path = self.path("dense.tnso")
        f = self.info(path)
        self.assertEqual(f["format"], "packet")
        self.assertEqual(len(f["tensors"]), 1)
        t = f["tensors"][0]
        self.assertEqual((t["name"], t["kind"], t["dtype"], t["shape"]), ("tensor", "dense", "float32", [2, 3]))
        self.assertEqual(t["flags"], {"integrity": True, "compressed": False, "hashed": False})
        self.assertEqual((t["offset"], t["stored_bytes"]), (0, os.path.getsize(path)))
        self.assertEqual((t["body_offset"], t["alignment"]), (64, 64))  # header padded to 64
        self.assertEqual(self.body(path, t), DENSE)
        self.assertEqual(f["metadata"], {})
        table = run("info", path).stdout
        self.assertIn("packet, 1 tensor", table)
        self.assertRegex(table, r"tensor +dense +float32 +\[2, 3\] +%d +0 +64 +integrity" % os.path.getsize(path))

    def test_info_bundle_packet(self):
        f = self.check_bundle_tensors(self.path("bundle.tnso"), "packet")
        self.assertTrue(all(t["flags"]["integrity"] for t in f["tensors"]))
        table = run("info", self.path("bundle.tnso")).stdout
        for name in BUNDLE:
            self.assertIn(name, table)

    def test_info_every_kind(self):
        f = self.info(self.path("kinds.tnso"))
        rows = {t["name"]: t for t in f["tensors"]}
        self.assertEqual(list(rows), ["dense", "q8", "names", "csr", "nested", "nested/x"])
        self.assertEqual((rows["q8"]["kind"], rows["q8"]["dtype"], rows["q8"]["shape"]), ("quantized", "qint8", [2, 4]))
        self.assertEqual((rows["names"]["kind"], rows["names"]["shape"]), ("string", [3]))
        self.assertEqual(
            (rows["csr"]["kind"], rows["csr"]["dtype"], rows["csr"]["shape"]), ("sparse_csr", "float64", [3, 3])
        )
        self.assertEqual(rows["csr"]["nbytes"], 3 * 8 + 3 * 8 + 4 * 8)
        self.assertEqual(
            (rows["nested"]["kind"], rows["nested"]["entries"], rows["nested"]["dtype"]), ("bundle", 1, None)
        )
        self.assertEqual((rows["nested/x"]["depth"], rows["nested/x"]["dtype"]), (2, "uint8"))
        self.assertEqual(self.body(self.path("kinds.tnso"), rows["nested/x"]), bytes([7, 9]))
        self.assertEqual(self.body(self.path("kinds.tnso"), rows["names"]), b"alphabeta")
        self.assertEqual(f["totals"]["tensors"], 5)  # the bundle row is not a tensor

    def test_info_packet_stream(self):
        path = self.path("stream.tnso")
        f = self.info(path)
        self.assertEqual(
            [(t["name"], t["packet"], t["dtype"]) for t in f["tensors"]],
            [("tensor_0", 0, "float32"), ("tensor_1", 1, "int32")],
        )
        self.assertEqual(f["tensors"][1]["offset"], f["tensors"][0]["stored_bytes"])
        self.assertEqual(self.body(path, f["tensors"][1]), struct.pack("<3i", 5, 6, 7))
        run("verify", path)

    def test_info_several_files_and_errors_in_json(self):
        missing = self.path("missing.bt")
        p = run("info", "--json", self.path("dense.tnso"), missing, self.path("bundle.tnso"), expect=3)
        doc = json.loads(p.stdout)
        self.assertEqual([("error" in f) for f in doc["files"]], [False, True, False])
        self.assertEqual(doc["files"][1]["error"]["status"], "TENSO_E_NOT_FOUND")
        self.assertEqual(doc["files"][1]["error"]["code"], -21)

    # ---- convert ----

    def test_round_trip_tenso_safetensors_bt_tenso(self):
        a, b, c, d = (self.path(n) for n in ("rt.tenso", "rt.safetensors", "rt.bt", "rt2.tenso"))
        run("convert", "-q", self.path("bundle.tnso"), a)
        self.check_bundle_tensors(a, "tenso")
        run("convert", "-q", a, b)
        self.check_bundle_tensors(b, "safetensors")
        tensors, meta = read_safetensors(b)
        self.assertEqual(meta, {})
        self.assertEqual(sorted(tensors), sorted(BUNDLE))
        for name, (dtype, shape, raw) in BUNDLE.items():
            self.assertEqual(tensors[name], (ST_DTYPES[dtype], shape, raw), name)
        run("convert", "-q", b, c)
        self.check_bundle_tensors(c, "bintensors")
        out = run("convert", c, d).stdout
        self.assertIn("4 tensors", out)
        f = self.check_bundle_tensors(d, "tenso")
        self.assertTrue(all(t["flags"]["hashed"] for t in f["tensors"]))
        for path in (a, b, c, d):
            self.assertIn(": OK", run("verify", path).stdout)

    def test_metadata_and_names_carried_over(self):
        src, a, b, c = (self.path(n) for n in ("meta.safetensors", "meta.tenso", "meta.bt", "meta2.safetensors"))
        meta = {"author": "tenso \"cli\"", "note": "ünïcode\nline\ttab\\", "format": "pt"}
        names = ["plain", "with \"quotes\"", "new\nline", "ω.layer.0", "ctl\x01"]
        tensors = [(n, "F32", [2], struct.pack("<2f", i, -i)) for i, n in enumerate(names)]
        tensors.append(("empty", "I64", [0, 3], b""))
        write_safetensors(src, tensors, meta)
        f = self.info(src)
        self.assertEqual(f["metadata"], meta)
        self.assertEqual([t["name"] for t in f["tensors"]], names + ["empty"])
        self.assertIn("metadata", run("info", src).stdout)
        run("convert", "-q", src, a)
        self.assertEqual(self.info(a)["metadata"], meta)
        run("convert", "-q", a, b)
        run("convert", "-q", b, c)
        got, got_meta = read_safetensors(c)
        self.assertEqual(got_meta, meta)
        self.assertEqual(got, {n: (d, s, r) for n, d, s, r in tensors})

    def test_convert_options(self):
        src = self.path("bundle.tnso")
        a, b, c = self.path("al.tenso"), self.path("lz.tenso"), self.path("lz.safetensors")
        run("convert", "-q", "--alignment", "4096", "--integrity", "--no-hash", src, a)
        f = self.check_bundle_tensors(a, "tenso")
        self.assertEqual(f["alignment"], 4096)
        self.assertIn(", aligned to 4096,", run("info", a).stdout)
        self.assertIsNone(self.info(src)["alignment"])  # a packet file promises none
        for t in f["tensors"]:
            self.assertEqual(t["alignment"], 4096, t)
            self.assertEqual(t["offset"] % 4096, 0, t)
            self.assertEqual(t["flags"], {"integrity": True, "compressed": False, "hashed": False})
        run("verify", a)
        # weight (128 bytes of a ramp) compresses; its body is then not stored raw
        run("convert", "-q", "--compress", "--to=tenso", src, b + ".x")
        os.rename(b + ".x", b)
        rows = {t["name"]: t for t in self.info(b)["tensors"]}
        self.assertTrue(rows["weight"]["flags"]["compressed"])
        self.assertIsNone(rows["weight"]["body_offset"])
        run("verify", b)
        run("convert", "-q", b, c)
        got, _ = read_safetensors(c)
        self.assertEqual(got["weight"][2], BUNDLE["weight"][2])

    def test_convert_every_kind_to_archive(self):
        a = self.path("kinds.tenso")
        run("convert", "-q", self.path("kinds.tnso"), a)
        f = self.info(a)
        self.assertEqual(
            [(t["name"], t["kind"]) for t in f["tensors"]],
            [("dense", "dense"), ("q8", "quantized"), ("names", "string"), ("csr", "sparse_csr"), ("nested", "bundle")],
        )
        self.assertEqual(f["tensors"][4]["entries"], 1)
        run("verify", a)
        # Re-encoding every kind from the archive's views gives the very same packets.
        b = self.path("kinds2.tenso")
        run("convert", "-q", a, b)
        g = self.info(b)
        blob_a, blob_b = read_bytes(a), read_bytes(b)
        for ta, tb in zip(f["tensors"], g["tensors"]):
            self.assertEqual((ta["name"], ta["kind"], ta["stored_bytes"]), (tb["name"], tb["kind"], tb["stored_bytes"]))
            self.assertEqual(
                blob_a[ta["offset"] : ta["offset"] + ta["stored_bytes"]],
                blob_b[tb["offset"] : tb["offset"] + tb["stored_bytes"]],
                ta["name"],
            )
        # safetensors holds dense tensors only: exit 1, the tensor named, no output left behind
        out = self.path("kinds.safetensors")
        p = run("convert", self.path("kinds.tnso"), out, expect=1)
        self.assertIn('tensor "q8"', p.stderr)
        self.assertIn("(TENSO_E_UNSUPPORTED_KIND)", p.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([n for n in os.listdir(self.dir) if n.startswith("kinds.safetensors")], [])

    # ---- verify ----

    def test_verify_detects_a_flipped_byte(self):
        a = self.path("flip.tenso")
        run("convert", "-q", self.path("bundle.tnso"), a)
        self.assertEqual(run("verify", a).stdout, "%s: OK\n" % a)
        rows = {t["name"]: t for t in self.info(a)["tensors"]}
        self.assertTrue(rows["bias"]["flags"]["hashed"])
        with open(a, "r+b") as f:
            f.seek(rows["bias"]["body_offset"] + 5)
            byte = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([byte[0] ^ 0x40]))
        p = run("verify", a, expect=1)
        self.assertEqual(p.stdout, "%s: FAILED\n" % a)
        self.assertIn('tenso: %s: tensor "bias": ' % a, p.stderr)
        self.assertIn("(TENSO_E_CHECKSUM)", p.stderr)
        doc = json.loads(run("verify", "--json", self.path("dense.tnso"), a, expect=1).stdout)
        self.assertFalse(doc["ok"])
        self.assertEqual([f["ok"] for f in doc["files"]], [True, False])
        self.assertEqual(doc["files"][1]["error"]["tensor"], "bias")
        self.assertEqual(doc["files"][1]["error"]["status"], "TENSO_E_CHECKSUM")
        # info reads the index only, so it still works; converting refuses the bad tensor
        self.info(a)
        p = run("convert", a, self.path("flip.bt"), expect=1)
        self.assertIn("(TENSO_E_CHECKSUM)", p.stderr)

    def test_archive_of_scalars_only(self):
        # An archive whose every tensor is a scalar has an empty shape table (once an
        # out-of-range reference under UBSan).
        src = self.path("scalar.tnso")
        with open(src, "wb") as f:
            f.write(
                read_bytes(
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors", "dense_f32_scalar.tenso")
                )
            )
        a = self.path("scalar.tenso")
        run("convert", "-q", src, a)
        self.assertEqual(run("verify", a).stdout, "%s: OK\n" % a)
        rows = self.info(a)["tensors"]
        self.assertEqual([(t["name"], t["shape"], t["nbytes"]) for t in rows], [("tensor", [], 4)])

    def test_verify_packet_footer(self):
        path = self.path("dense-flip.tnso")
        shutil.copy(self.path("dense.tnso"), path)
        run("verify", "-q", path)
        with open(path, "r+b") as f:
            f.seek(64)
            f.write(b"\xff")
        p = run("verify", path, expect=1)
        self.assertIn("(TENSO_E_CHECKSUM)", p.stderr)
        run("info", path)  # the header is intact

    # ---- hostile input ----

    def test_hostile_files_exit_1(self):
        cases = {
            "empty.bin": b"",
            "garbage.bin": bytes(range(256)) * 4,
            "short.tnso": read_bytes(self.path("dense.tnso"))[:40],
            "tail.tnso": read_bytes(self.path("dense.tnso")) + b"TNSO",
            "st-huge.safetensors": struct.pack("<Q", 1 << 60) + b"{}",
            "st-bad.safetensors": struct.pack("<Q", 8) + b'{"a": 1}',
            "st-range.safetensors": None,
        }
        write_safetensors(self.path("st-range.safetensors"), [("a", "F32", [4], b"\0" * 8)])
        for name, blob in cases.items():
            path = self.path(name)
            if blob is not None:
                with open(path, "wb") as f:
                    f.write(blob)
            for cmd in ("info", "verify"):
                p = run(cmd, path, expect=1)
                self.assertRegex(p.stderr, r"^tenso: %s: .+ \(TENSO_E_[A-Z_]+\)\n" % path)
                self.assertNotIn("TENSO_E_INTERNAL", p.stderr)
        p = run("info", self.path("short.tnso"), expect=1)
        self.assertIn("(TENSO_E_TRUNCATED)", p.stderr)
        # a truncated archive, cut anywhere, is refused with a status, never a crash
        a = self.path("cut.tenso")
        run("convert", "-q", self.path("bundle.tnso"), a)
        blob = read_bytes(a)
        for cut in (0, 1, 8, 64, len(blob) // 2, len(blob) - 1):
            with open(a, "wb") as f:
                f.write(blob[:cut])
            p = run("verify", a, expect=1)
            self.assertRegex(p.stderr, r"\(TENSO_E_[A-Z_]+\)")

    def test_convert_json(self):
        out = self.path("j.safetensors")
        doc = json.loads(run("convert", "--json", self.path("bundle.tnso"), out).stdout)
        self.assertTrue(doc["ok"])
        self.assertEqual((doc["input_format"], doc["output_format"]), ("packet", "safetensors"))
        self.assertEqual(doc["tensors"], 4)
        self.assertEqual(doc["dense_bytes"], sum(len(r) for _, _, r in BUNDLE.values()))
        self.assertEqual(doc["output_bytes"], os.path.getsize(out))
        self.assertEqual(doc["input_bytes"], os.path.getsize(self.path("bundle.tnso")))
        # A failure is a JSON document too, with the status and the exit code scripts test.
        p = run(
            "convert", "--json", self.path("no-such-file.tenso"), self.path("x.tenso"), expect=3
        )  # NOT_FOUND: the system refused
        doc = json.loads(p.stdout)
        self.assertFalse(doc["ok"])
        self.assertEqual(doc["error"]["status"], "TENSO_E_NOT_FOUND")
        self.assertFalse(os.path.exists(self.path("x.tenso")))

    def test_progress_bar_only_on_a_terminal(self):
        import pty

        a = self.path("progress.tenso")
        run("convert", "-q", self.path("bundle.tnso"), a)
        master, slave = pty.openpty()
        p = subprocess.Popen([*CLI, "verify", a], stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        self.assertEqual(p.wait(timeout=60), 0)
        self.assertRegex(seen, rb"\rverify [^\r]*\[[#.]{30}\] +\d+%")  # drawn, then erased
        self.assertIn(b"\r\x1b[K", seen)
        # Captured by a script: no bar anywhere.
        p = run("verify", a)
        self.assertNotIn("\r", p.stderr + p.stdout)

    # ---- bench ----

    def test_bench_json(self):
        doc = json.loads(run("bench", "--json", self.path("bundle.tnso")).stdout)
        self.assertEqual([s["bytes"] for s in doc["sizes"]], [1024, 1 << 20, 16 << 20])
        for s in doc["sizes"]:
            for k in ("memcpy_ns", "dumps_into_ns", "dumps_into_integrity_ns", "loads_ns", "loads_verify_ns"):
                self.assertGreater(s[k], 0, k)
        self.assertEqual(doc["file"]["tensors"], 4)
        self.assertEqual(doc["file"]["bytes_read"], sum(len(r) for _, _, r in BUNDLE.values()))
        self.assertIn("memcpy", run("bench").stdout)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[1:])
