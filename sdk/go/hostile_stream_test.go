//go:build cgo

package tenso

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"testing/iotest"
	"time"
)

// hostileCases are a few golden packets of different shapes: the first of each kind, plus
// an LZ4-compressed one and one with an integrity footer.
func hostileCases(t *testing.T) []*goldenCase {
	t.Helper()
	var out []*goldenCase
	seen := map[string]bool{}
	for _, c := range loadGolden(t) {
		key := c.Value.Kind
		switch {
		case c.Compressed:
			key = "lz4"
		case c.Options.CheckIntegrity:
			key = "integrity"
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, c)
		}
	}
	if len(out) < 6 {
		t.Fatalf("only %d golden cases", len(out))
	}
	return out
}

// Truncation at every byte: a stream cut anywhere inside a packet is ErrTruncated (and
// io.ErrUnexpectedEOF), cut before it io.EOF; never a crash, a hang or a wrong packet.
func TestHostileTruncationAtEveryByte(t *testing.T) {
	for _, c := range hostileCases(t) {
		for cut := 0; cut < len(c.bytes); cut++ {
			_, err := ReadFrom(bytes.NewReader(c.bytes[:cut]))
			want := ErrTruncated
			if cut == 0 {
				want = ErrEndOfStream
			}
			if !errors.Is(err, want) {
				t.Fatalf("%s cut at %d of %d: %v, want %s", c.Name, cut, len(c.bytes), err, want.Name())
			}
			if cut > 0 && !errors.Is(err, io.ErrUnexpectedEOF) || cut == 0 && !errors.Is(err, io.EOF) {
				t.Fatalf("%s cut at %d: %v does not match the io sentinel", c.Name, cut, err)
			}
		}
		got, err := ReadFrom(bytes.NewReader(c.bytes))
		if err != nil {
			t.Fatalf("%s whole: %v", c.Name, err)
		}
		checkValue(t, c.Name, got, c.Value)
	}
}

// A slow sender delivering one byte at a time over a socket, several packets back to back:
// every packet arrives whole, and nothing past a packet is consumed.
func TestHostileSlowSender(t *testing.T) {
	cs := hostileCases(t)
	a, b := socketPair(t)
	defer b.Close()
	go func() {
		defer a.Close()
		for _, c := range cs {
			for i := range c.bytes {
				if _, err := a.Write(c.bytes[i : i+1]); err != nil {
					return
				}
			}
		}
	}()
	for _, c := range cs {
		got, err := ReadFrom(b)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		checkValue(t, c.Name+" (one byte at a time)", got, c.Value)
	}
	if _, err := ReadFrom(b); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last packet: %v", err)
	}
	// The same through a reader that returns one byte per Read (no descriptor).
	var all []byte
	for _, c := range cs {
		all = append(all, c.bytes...)
	}
	r := iotest.OneByteReader(bytes.NewReader(all))
	for _, c := range cs {
		got, err := ReadFrom(r)
		if err != nil {
			t.Fatalf("%s (OneByteReader): %v", c.Name, err)
		}
		checkValue(t, c.Name+" (OneByteReader)", got, c.Value)
	}
}

// A peer that sends part of a packet and goes quiet: the read deadline interrupts the wait
// inside the packet (os.ErrDeadlineExceeded), and so does a context.
func TestHostileQuietPeerDeadline(t *testing.T) {
	pkt := must(Dumps(Vector(make([]float32, 1000))))
	for _, sent := range []int{4, 40, len(pkt) - 1} {
		a, b := socketPair(t)
		if _, err := a.Write(pkt[:sent]); err != nil {
			t.Fatal(err)
		}
		b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := ReadFrom(b)
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, ErrIO) {
			t.Fatalf("quiet after %d bytes, deadline: %v", sent, err)
		}
		b.SetReadDeadline(time.Time{})

		// Context: a deadline, then a cancellation.
		a2, b2 := socketPair(t)
		a2.Write(pkt[:sent])
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err = ReadFromContext(ctx, b2)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("quiet after %d bytes, context deadline: %v", sent, err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		a3, b3 := socketPair(t)
		a3.Write(pkt[:sent])
		_, err = ReadFromContext(ctx, b3)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("quiet after %d bytes, cancelled: %v", sent, err)
		}
		for _, c := range []io.Closer{a, b, a2, b2, a3, b3} {
			c.Close()
		}
	}
	// A context that is not done leaves the read alone, and clears the deadline it set.
	a, b := socketPair(t)
	defer a.Close()
	defer b.Close()
	go a.Write(pkt)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	got, err := ReadFromContext(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if v := must(Values[float32](got)); len(v) != 1000 {
		t.Fatalf("%d values", len(v))
	}
	if _, err := ReadFromContext(ctx, bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Fatalf("a reader without deadlines: %v", err)
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := ReadFromContext(done, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
}

// Closing the connection from another goroutine interrupts a read stuck inside a packet.
func TestHostileCloseInterruptsRead(t *testing.T) {
	a, b := socketPair(t)
	defer a.Close()
	a.Write(must(Dumps(Vector(make([]float32, 1000))))[:100])
	time.AfterFunc(30*time.Millisecond, func() { b.Close() })
	if _, err := ReadFrom(b); !errors.Is(err, ErrIO) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed connection: %v", err)
	}
}

// Bad bytes: a wrong magic, and garbage after a valid header, give the decoder's statuses.
func TestHostileGarbage(t *testing.T) {
	pkt := must(Dumps(Vector([]int64{1, 2, 3})))
	bad := slices.Clone(pkt)
	bad[0] ^= 0xff
	if _, err := ReadFrom(bytes.NewReader(bad)); !errors.Is(err, ErrBadMagic) {
		t.Errorf("bad magic: %v", err)
	}
	bad = slices.Clone(pkt)
	bad[7] = 0x7f // dtype code nobody knows (v4: dtype at byte 7)
	if _, err := ReadFrom(bytes.NewReader(bad)); !errors.Is(err, ErrBadDType) {
		t.Errorf("bad dtype: %v", err)
	}
}
