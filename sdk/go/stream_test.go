//go:build cgo

package tenso

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

// streamCases are the golden packets a relay must give back byte for byte.
func streamCases(t testing.TB) ([]*goldenCase, []byte) {
	var cs []*goldenCase
	var all []byte
	for _, c := range loadGolden(t) {
		if c.byteExact() {
			cs = append(cs, c)
			all = append(all, c.bytes...)
		}
	}
	return cs, all
}

// readAll reads packets until the end of the stream, checking each against the golden case
// and re-encoding it with its own options.
// readAll reads every case back; a stream never leaves C memory behind (the Tensors are Go memory).
func readAll(t *testing.T, r io.Reader, cs []*goldenCase) {
	t.Helper()
	for i, c := range cs {
		got, err := ReadFrom(r)
		if err != nil {
			t.Fatalf("packet %d (%s): %v", i, c.Name, err)
		}
		if got.OwnsCMemory() {
			t.Errorf("%s: a Tensor read from a stream must be Go memory", c.Name)
		}
		checkValue(t, c.Name, got, c.Value)
		out, err := EncodeOptions{AsDecoded: true}.Dumps(got)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffBytes(out, c.bytes); d != "" {
			t.Errorf("%s: %s", c.Name, d)
		}
		got.Close()
	}
	_, err := ReadFrom(r)
	if !errors.Is(err, ErrEndOfStream) || !errors.Is(err, io.EOF) {
		t.Fatalf("after the last packet: %v, want ErrEndOfStream and io.EOF", err)
	}
}

func TestReadFromReader(t *testing.T) {
	cs, all := streamCases(t)
	t.Run("bytes.Reader", func(t *testing.T) { readAll(t, bytes.NewReader(all), cs) })
	// One byte per Read: framing must still work, and never read past a packet.
	t.Run("OneByteReader", func(t *testing.T) { readAll(t, iotest.OneByteReader(bytes.NewReader(all)), cs) })
	t.Run("HalfReader", func(t *testing.T) { readAll(t, iotest.HalfReader(bytes.NewReader(all)), cs) })
	t.Run("DataErrReader", func(t *testing.T) { readAll(t, iotest.DataErrReader(bytes.NewReader(all)), cs) })

	t.Run("exact", func(t *testing.T) {
		r := bytes.NewReader(all)
		for _, c := range cs {
			rest := r.Len()
			if _, err := ReadFrom(r); err != nil {
				t.Fatal(err)
			}
			if consumed := rest - r.Len(); consumed != c.Size {
				t.Fatalf("%s: consumed %d bytes, the packet has %d", c.Name, consumed, c.Size)
			}
		}
	})
}

func TestReadFromTruncated(t *testing.T) {
	c := goldenNamed(t, "bundle_mixed")
	cut := c.bytes[:c.Size-1]
	_, err := ReadFrom(bytes.NewReader(cut))
	wantStatus(t, "reader", err, ErrTruncated)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("%v does not match io.ErrUnexpectedEOF", err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() { w.Write(cut); w.Close() }()
	_, err = ReadFrom(r)
	wantStatus(t, "pipe", err, ErrTruncated)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("%v does not match io.ErrUnexpectedEOF", err)
	}

	_, err = ReadFrom(iotest.ErrReader(errors.New("boom")))
	if !errors.Is(err, ErrIO) || err.(*Error).Err.Error() != "boom" {
		t.Errorf("failing reader: %v", err)
	}
}

// A header may claim a huge body. The decoder checks the claim against the limits before
// asking for the buffer (so MaxPacketBytes / MaxDecodedBytes refuse it with nothing
// allocated), then allocates exactly the claimed packet once - never more - and a claim
// beyond this machine's memory is refused (ErrNoMemory) instead of aborting the process.
func TestReadFromLyingHeader(t *testing.T) {
	pkt, err := Dumps(NewTensor(Uint8, []uint64{1}, []byte{7}))
	if err != nil {
		t.Fatal(err)
	}
	const n = 64 + 900_000_000 // header and shape padded to 64, then the claimed body
	// Shape words follow the 10-byte header: make the 1-element packet claim 900e6.
	lie := append([]byte(nil), pkt[:64]...)
	lie[10], lie[11], lie[12], lie[13] = 0x00, 0xe9, 0xa4, 0x35 // 900000000 little-endian
	if need, err := PacketLength(lie); !errors.Is(err, ErrTruncated) || need != n {
		t.Fatalf("PacketLength(lie) = %d, %v; want ErrTruncated, %d", need, err, n)
	}
	allocated := func(o DecodeOptions, want Status) uint64 {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := o.ReadPacket(bytes.NewReader(lie))
		runtime.ReadMemStats(&after)
		wantStatus(t, fmt.Sprintf("lying header, %+v", o), err, want)
		return after.TotalAlloc - before.TotalAlloc
	}
	if grew := allocated(DecodeOptions{MaxPacketBytes: 1 << 20}, ErrLimit); grew > 1<<20 {
		t.Errorf("MaxPacketBytes: reading a 64-byte lie allocated %d bytes", grew)
	}
	if grew := allocated(DecodeOptions{MaxDecodedBytes: 1 << 20}, ErrLimit); grew > 1<<20 {
		t.Errorf("MaxDecodedBytes: reading a 64-byte lie allocated %d bytes", grew)
	}
	if grew := allocated(DecodeOptions{MaxElements: 1 << 20}, ErrTooManyElements); grew > 1<<20 {
		t.Errorf("MaxElements: reading a 64-byte lie allocated %d bytes", grew)
	}
	if grew := allocated(DecodeOptions{}, ErrTruncated); grew < n || grew > n+(1<<20) {
		t.Errorf("default limits: %d bytes allocated, want the claimed %d once", grew, n)
	}
	saved := physicalMemory
	physicalMemory = 1 << 20 // as if this machine had 1 MiB
	defer func() { physicalMemory = saved }()
	if grew := allocated(DecodeOptions{}, ErrNoMemory); grew > 1<<20 {
		t.Errorf("beyond memory: %d bytes allocated", grew)
	}
}

// Files, pipes and stream sockets go through libtenso's descriptor I/O.
func TestStreamFD(t *testing.T) {
	cs, all := streamCases(t)

	t.Run("pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		errc := make(chan error, 1)
		go func() {
			defer w.Close()
			for _, c := range cs {
				d, err := Loads(c.bytes)
				if err == nil {
					_, err = EncodeOptions{AsDecoded: true}.DumpTo(w, d)
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		readAll(t, r, cs)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("file", func(t *testing.T) {
		f, err := os.CreateTemp(t.TempDir(), "stream")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var total int64
		for _, c := range cs {
			d, err := Loads(c.bytes)
			if err != nil {
				t.Fatal(err)
			}
			n, err := EncodeOptions{AsDecoded: true}.DumpTo(f, d)
			if err != nil || n != int64(c.Size) {
				t.Fatalf("%s: DumpTo = %d, %v; want %d", c.Name, n, err, c.Size)
			}
			total += n
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(f)
		if err != nil || !bytes.Equal(raw, all) {
			t.Fatalf("file content differs from the golden stream (%d vs %d bytes, %v)", len(raw), len(all), err)
		}
		f.Seek(0, io.SeekStart)
		readAll(t, f, cs)
	})

	t.Run("unix socketpair", func(t *testing.T) {
		a, b := socketPair(t)
		defer a.Close()
		defer b.Close()
		go func() {
			defer a.(interface{ CloseWrite() error }).CloseWrite()
			a.Write(all)
		}()
		readAll(t, b, cs)
	})

	t.Run("net.Pipe (no descriptor)", func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		go func() {
			defer a.Close()
			for _, c := range cs {
				d, _ := Loads(c.bytes)
				if _, err := (EncodeOptions{AsDecoded: true}).DumpTo(a, d); err != nil {
					return
				}
			}
		}()
		readAll(t, b, cs)
	})
}

// A large tensor over TCP: partial reads and writes on a non-blocking socket.
func TestStreamTCPLarge(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	defer ln.Close()
	const n = 3<<20 + 5
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i) * 0.5
	}
	want := Vector(src)
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		for _, o := range []EncodeOptions{{}, {Integrity: true}, {Compress: true}} {
			if _, err := o.DumpTo(c, want); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		got, err := ReadFrom(c)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		vals, err := Values[float32](got)
		if err != nil {
			t.Fatal(err)
		}
		if len(vals) != n || vals[n-1] != src[n-1] || vals[12345] != src[12345] {
			t.Fatalf("packet %d: wrong values", i)
		}
		if !bytes.Equal(got.Data, AsBytes(src)) {
			t.Fatalf("packet %d: body differs", i)
		}
		got.Close()
	}
	if _, err := ReadFrom(c); !errors.Is(err, ErrEndOfStream) {
		t.Fatalf("after 3 packets: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skipf("socketpair: %v", err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

func TestDumpToWriterErrors(t *testing.T) {
	v := Vector([]float32{1, 2, 3})
	_, err := DumpTo(failWriter{}, v)
	if !errors.Is(err, ErrIO) || !errors.Is(err, errWriteFailed) {
		t.Errorf("failing writer: %v", err)
	}
	r, w, _ := os.Pipe()
	r.Close()
	w.Close()
	if _, err := DumpTo(w, v); !errors.Is(err, ErrIO) {
		t.Errorf("closed file: %v", err)
	}
	// A pipe whose reader is gone: libtenso's writev gets EPIPE (the SIGPIPE it raises on a
	// Go thread is ignored by the Go runtime for descriptors other than 1 and 2).
	r, w, _ = os.Pipe()
	r.Close()
	defer w.Close()
	n, err := DumpTo(w, Vector(make([]float64, 1<<16)))
	if !errors.Is(err, ErrIO) || n != 0 {
		t.Errorf("broken pipe: %d, %v", n, err)
	}
}

var errWriteFailed = errors.New("write failed")

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return 0, errWriteFailed }

// An idle socket: the wait for a packet's first byte is Go's, so a deadline interrupts it,
// and the connection still works afterwards.
func TestStreamDeadline(t *testing.T) {
	a, b := socketPair(t)
	defer a.Close()
	defer b.Close()
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := ReadFrom(b)
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, ErrIO) {
		t.Fatalf("idle read with a deadline: %v", err)
	}
	b.SetReadDeadline(time.Time{})
	go DumpTo(a, Vector([]int32{7}))
	got, err := ReadFrom(b)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if v, _ := Values[int32](got); !slices.Equal(v, []int32{7}) {
		t.Errorf("after the deadline: %v", v)
	}
}
