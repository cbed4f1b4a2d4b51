//go:build cgo

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

const vectorsDir = "../../../../tests/vectors"

type golden struct {
	Name       string `json:"name"`
	File       string `json:"file"`
	Compressed bool   `json:"compressed"`
	Version    int    `json:"version"`
	bytes      []byte
}

func (g golden) byteExact() bool { return !g.Compressed && g.Version == tenso.ProtocolVersion }

func loadGolden(t *testing.T) []golden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Cases []golden }
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for i := range m.Cases {
		if m.Cases[i].bytes, err = os.ReadFile(filepath.Join(vectorsDir, m.Cases[i].File)); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.Cases) == 0 {
		t.Fatal("no golden cases")
	}
	return m.Cases
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// relayBinary builds the command (once per test binary) with the toolchain running the test.
func relayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tenso-relay")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "tenso-relay")
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if out, err := exec.Command(gobin, "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func run(t *testing.T, bin string, stdin []byte) (stdout, stderr []byte, code int) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(stdin) // through a pipe: the relay reads a descriptor
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return o.Bytes(), e.Bytes(), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.Bytes(), e.Bytes(), 0
}

// normalize decodes every packet of a stream and writes it again with the default options,
// so streams holding the same values compare equal whatever LZ4 encoder made them.
func normalize(t *testing.T, stream []byte) [][]byte {
	t.Helper()
	var out [][]byte
	r := bytes.NewReader(stream)
	for {
		v, err := tenso.ReadFrom(r)
		if errors.Is(err, tenso.ErrEndOfStream) {
			return out
		}
		if err != nil {
			t.Fatalf("packet %d: %v", len(out), err)
		}
		p, err := tenso.Dumps(v)
		if err != nil {
			t.Fatalf("packet %d: %v", len(out), err)
		}
		out = append(out, p)
	}
}

func TestRelayGoldenBytes(t *testing.T) {
	var exact, all []byte
	n := 0
	for _, g := range loadGolden(t) {
		all = append(all, g.bytes...)
		if g.byteExact() {
			exact = append(exact, g.bytes...)
			n++
		}
	}
	bin := relayBinary(t)

	out, stderr, code := run(t, bin, exact)
	if code != 0 || !bytes.Equal(out, exact) {
		t.Fatalf("relay of %d uncompressed golden packets: exit %d, %d bytes out for %d in, equal=%v\n%s",
			n, code, len(out), len(exact), bytes.Equal(out, exact), stderr)
	}

	// Compressed and legacy packets come back as the same values.
	out, stderr, code = run(t, bin, all)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	in, back := normalize(t, all), normalize(t, out)
	if len(in) != len(back) {
		t.Fatalf("%d packets in, %d out", len(in), len(back))
	}
	for i := range in {
		if !bytes.Equal(in[i], back[i]) {
			t.Errorf("packet %d changed value through the relay", i)
		}
	}

	// In-process, through the io.Reader / io.Writer paths.
	var buf bytes.Buffer
	if k, err := relay(bytes.NewReader(exact), &buf); err != nil || k != n || !bytes.Equal(buf.Bytes(), exact) {
		t.Fatalf("relay(): %d packets, %v, equal=%v", k, err, bytes.Equal(buf.Bytes(), exact))
	}
}

func TestRelayEnds(t *testing.T) {
	bin := relayBinary(t)
	if out, stderr, code := run(t, bin, nil); code != 0 || len(out) != 0 {
		t.Errorf("empty input: exit %d, %d bytes, %s", code, len(out), stderr)
	}
	gs := loadGolden(t)
	first := gs[0].bytes
	second := gs[1].bytes
	in := append(append([]byte{}, first...), second[:len(second)-1]...)
	out, stderr, code := run(t, bin, in)
	if code != 1 || !strings.Contains(string(stderr), "packet 1") || !strings.Contains(string(stderr), "TENSO_E_TRUNCATED") {
		t.Errorf("truncated input: exit %d, stderr %q", code, stderr)
	}
	if !bytes.Equal(out, first) {
		t.Errorf("the complete packet before the truncated one was not relayed")
	}
	if _, _, code := run(t, bin, []byte("not a tenso stream")); code != 1 {
		t.Errorf("garbage: exit %d", code)
	}
}

// A large tensor crosses two pipes of 64 KiB.
func TestRelayLarge(t *testing.T) {
	v := make([]float64, 2<<20)
	for i := range v {
		v[i] = float64(i) / 3
	}
	var in []byte
	for _, o := range []tenso.EncodeOptions{{}, {Integrity: true}, {Alignment: 4096}} {
		p, err := o.Dumps(tenso.Vector(v))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, p...)
	}
	out, stderr, code := run(t, relayBinary(t), in)
	if code != 0 || !bytes.Equal(out, in) {
		t.Fatalf("exit %d, %d of %d bytes, equal=%v: %s", code, len(out), len(in), bytes.Equal(out, in), stderr)
	}
}
