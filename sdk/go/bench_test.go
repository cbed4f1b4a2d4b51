//go:build cgo

package tenso

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
)

// go test -run '^$' -bench . -benchmem
//
// The 64 MiB cases compare Loads / Dumps of a float32 tensor with a plain copy of the same
// bytes; the 1 KiB cases measure the per-call overhead, cgo included.

const big = 64 << 20

func f32Tensor(nbytes int) *Tensor {
	v := make([]float32, nbytes/4)
	for i := range v {
		v[i] = float32(i)
	}
	return Vector(v)
}

func BenchmarkCopy64MiB(b *testing.B) {
	src := f32Tensor(big).Data
	dst := make([]byte, len(src))
	b.SetBytes(big)
	for b.Loop() {
		copy(dst, src)
	}
}

func benchLoads(b *testing.B, nbytes int, opts EncodeOptions) {
	pkt, err := opts.Dumps(f32Tensor(nbytes))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(nbytes))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Loads(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoads64MiB(b *testing.B)          { benchLoads(b, big, EncodeOptions{}) }
func BenchmarkLoads64MiBIntegrity(b *testing.B) { benchLoads(b, big, EncodeOptions{Integrity: true}) }
func BenchmarkLoads1KiB(b *testing.B)           { benchLoads(b, 1<<10, EncodeOptions{}) }

func BenchmarkDumps64MiB(b *testing.B) {
	t := f32Tensor(big)
	b.SetBytes(big)
	for b.Loop() {
		if _, err := Dumps(t); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDumpsInto(b *testing.B, nbytes int, opts EncodeOptions) {
	t := f32Tensor(nbytes)
	n, err := opts.DumpsBound(t)
	if err != nil {
		b.Fatal(err)
	}
	dst := alignedBytes(n)
	b.SetBytes(int64(nbytes))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := opts.DumpsInto(dst, t); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDumpsInto64MiB(b *testing.B) { benchDumpsInto(b, big, EncodeOptions{}) }
func BenchmarkDumpsInto64MiBIntegrity(b *testing.B) {
	benchDumpsInto(b, big, EncodeOptions{Integrity: true})
}
func BenchmarkDumpsInto1KiB(b *testing.B) { benchDumpsInto(b, 1<<10, EncodeOptions{}) }

// A bundle goes through the pinned path (tenso_value on encode, a kept view on decode).
func benchBundle(entries int) *Tensor {
	bnd := NewBundle()
	for i := 0; i < entries; i++ {
		bnd.Entries = append(bnd.Entries, Entry{Key: fmt.Sprint("k", i), Value: f32Tensor(1 << 10)})
	}
	return bnd
}

func BenchmarkLoadsBundle8x1KiB(b *testing.B) {
	pkt, err := Dumps(benchBundle(8))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Loads(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDumpsIntoBundle8x1KiB(b *testing.B) {
	t := benchBundle(8)
	n, _ := DumpsBound(t)
	dst := alignedBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DumpsInto(dst, t); err != nil {
			b.Fatal(err)
		}
	}
}

// The floor: one cgo call that does nothing (tenso_protocol_version).
func BenchmarkCgoCall(b *testing.B) {
	for b.Loop() {
		cProtocolVersion()
	}
}

// Receiving: ReadFrom (Go reads into the decoder's buffers, the packet lands in one Go
// buffer) against reading the same bytes with io.ReadFull into a fresh Go buffer of the
// packet's size, over an AF_UNIX socket pair with a writer goroutine sending back to back.
func BenchmarkReadFrom1KiB(b *testing.B)  { benchReceive(b, 1<<10, false) }
func BenchmarkRawRead1KiB(b *testing.B)   { benchReceive(b, 1<<10, true) }
func BenchmarkReadFrom1MiB(b *testing.B)  { benchReceive(b, 1<<20, false) }
func BenchmarkRawRead1MiB(b *testing.B)   { benchReceive(b, 1<<20, true) }
func BenchmarkReadFrom16MiB(b *testing.B) { benchReceive(b, 16<<20, false) }
func BenchmarkRawRead16MiB(b *testing.B)  { benchReceive(b, 16<<20, true) }

func benchReceive(b *testing.B, nbytes int, raw bool) {
	pkt, err := Dumps(f32Tensor(nbytes))
	if err != nil {
		b.Fatal(err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		b.Skip(err)
	}
	wf, rf := os.NewFile(uintptr(fds[0]), "w"), os.NewFile(uintptr(fds[1]), "r")
	defer rf.Close()
	go func() {
		defer wf.Close()
		for i := 0; i < b.N; i++ {
			if _, err := wf.Write(pkt); err != nil {
				return
			}
		}
	}()
	b.SetBytes(int64(len(pkt)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if raw {
			if _, err := io.ReadFull(rf, make([]byte, len(pkt))); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if _, err := ReadFrom(rf); err != nil {
			b.Fatal(err)
		}
	}
}
