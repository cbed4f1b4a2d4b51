//go:build cgo

package tenso

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The registry comes from libtenso: every named constant is one of its codes, with the name
// and classification the library gives.
func TestRegistryFromTheABI(t *testing.T) {
	all := DTypes()
	if len(all) < 21 {
		t.Fatalf("DTypes() lists %d codes, libtenso 1.3+ knows 21", len(all))
	}
	known := map[DType]bool{}
	for _, d := range all {
		known[d] = true
		back, err := ParseDType(d.String())
		if err != nil || back != d {
			t.Errorf("%d: name %q parses to %v, %v", d, d.String(), back, err)
		}
	}
	for _, d := range []DType{Float32, Int32, Float64, Int64, Uint8, Uint16, Bool, Float16, Int8, Int16, Uint32,
		Uint64, Complex64, Complex128, BFloat16, QInt8, QUInt8, QInt4, QUInt4, String, Bytes} {
		if !known[d] {
			t.Errorf("constant %d (%v) is not a libtenso dtype", d, d)
		}
	}
	for _, c := range []struct {
		d    DType
		kind Kind
		bits int
	}{{Float32, KindDense, 32}, {Complex128, KindDense, 128}, {Bool, KindDense, 8}, {QInt8, KindQuantized, 8},
		{QUInt4, KindQuantized, 4}, {String, KindString, 0}, {DType(99), 0, 0}} {
		if c.d.Kind() != c.kind || c.d.Bits() != c.bits {
			t.Errorf("%v: kind %v bits %d, want %v %d", c.d, c.d.Kind(), c.d.Bits(), c.kind, c.bits)
		}
	}
	kinds := Kinds()
	if len(kinds) < 9 {
		t.Fatalf("Kinds() lists %d, libtenso 1.3+ knows 9", len(kinds))
	}
	for _, k := range kinds {
		back, err := ParseKind(k.String())
		if err != nil || back != k {
			t.Errorf("kind %d: name %q parses to %v, %v", k, k.String(), back, err)
		}
	}
	if _, err := ParseKind("no-such-kind"); err == nil {
		t.Error("ParseKind accepted an unknown name")
	}
	if GPUBackendHost.String() != "host" || GPUBackendCUDA.String() != "cuda" || GPUBackendNone.String() != "none" {
		t.Errorf("backend names %v %v %v", GPUBackendHost, GPUBackendCUDA, GPUBackendNone)
	}
}

func TestLoadsEntry(t *testing.T) {
	b := NewBundle(Entry{Key: "a", Value: Vector([]int32{1, 2, 3})}, Entry{Key: "b", Value: Vector([]float64{0.5, 1.5})})
	pkt := must(Dumps(b))
	e, err := LoadsEntry(pkt, "b")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := Values[float64](e); err != nil || fmt.Sprint(v) != "[0.5 1.5]" {
		t.Fatalf("entry b: %v %v", v, err)
	}
	_, err = LoadsEntry(pkt, "zz")
	wantStatus(t, "missing key", err, ErrInvalidArgument)
	_, err = LoadsEntry(must(Dumps(Vector([]int32{1}))), "a")
	wantStatus(t, "not a bundle", err, ErrUnsupportedKind)
}

// Loads takes libtenso's struct path for plain dense packets and its view path for the rest;
// both give the same tensors and the same errors.
func TestLoadsDensePaths(t *testing.T) {
	in := must(FromSlice([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}))
	for _, o := range []EncodeOptions{{}, {Integrity: true}, {Compress: true}} {
		pkt := must(o.Dumps(in))
		got, err := Loads(pkt)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if v, _ := Values[float32](got); fmt.Sprint(got.Shape, v) != "[2 3] [1 2 3 4 5 6]" {
			t.Fatalf("%+v: got %v %v", o, got.Shape, v)
		}
	}
	bad := must(EncodeOptions{Integrity: true}.Dumps(in))
	bad[len(bad)-20] ^= 1
	_, err := Loads(bad)
	wantStatus(t, "flipped body bit", err, ErrChecksum)
	_, err = Loads(bad[:20])
	wantStatus(t, "cut packet", err, ErrTruncated)
}

func TestReadFd(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	in := Vector([]uint16{7, 8, 9})
	pkt := must(Dumps(in))
	go func() {
		w.Write(pkt)
		w.Write(pkt)
		w.Close()
	}()
	for i := 0; i < 2; i++ {
		got, err := DecodeOptions{}.ReadFd(r)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := Values[uint16](got); fmt.Sprint(v) != "[7 8 9]" {
			t.Fatalf("packet %d: %v", i, v)
		}
		got.Close()
	}
	_, err = DecodeOptions{}.ReadFd(r)
	wantStatus(t, "end of stream", err, ErrEndOfStream)
}

// A packet in a file goes to a unix:// peer as the descriptor itself; the receiver's
// descriptor polls readable while it waits, and ReceiveFunc lends the message's memory.
func TestNodeSendFdAndReceiveFunc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rx.sock")
	rx := newTestNode(t, NodeOptions{Listen: []string{"unix://" + path}, AllowPlaintext: true})
	tx := newTestNode(t, NodeOptions{NoListen: true, AllowPlaintext: true})
	ctx := testCtx(t)
	data := make([]float32, 4096)
	for i := range data {
		data[i] = float32(i) * 0.25
	}
	pkt := must(Dumps(must(FromSlice([]int{64, 64}, data))))
	f, err := os.CreateTemp(t.TempDir(), "packet")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const off = 4096 // the packet need not start the file
	if _, err := f.WriteAt(pkt, off); err != nil {
		t.Fatal(err)
	}
	rfd, err := rx.ReceiveFd()
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.SendFd(ctx, "unix://"+path, "m", f, off, uint64(len(pkt))); err != nil {
		t.Fatal(err)
	}
	// The descriptor is readable now that a push waits.
	var set syscall.FdSet
	set.Bits[rfd/64] |= 1 << (rfd % 64)
	tv := syscall.NsecToTimeval(int64(10 * time.Second))
	if n, err := syscall.Select(int(rfd)+1, &set, nil, nil, &tv); err != nil || n != 1 {
		t.Fatalf("select on ReceiveFd: %d %v", n, err)
	}
	var kept *Tensor
	err = rx.ReceiveFunc(ctx, func(m *Message) error {
		if m.Name != "m" || m.Sender == "" {
			return fmt.Errorf("name %q sender %q", m.Name, m.Sender)
		}
		v, err := Values[float32](m.Tensor)
		if err != nil || fmt.Sprint(m.Tensor.Shape) != "[64 64]" || v[4095] != data[4095] || v[1] != 0.25 {
			return fmt.Errorf("tensor %v %v", m.Tensor.Shape, err)
		}
		kept = m.Tensor
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if kept.Data != nil {
		t.Fatal("the borrowed tensor kept its data after ReceiveFunc returned")
	}
	// Errors: a bad range is refused before anything is sent; a closed file is refused.
	err = tx.SendFd(ctx, "unix://"+path, "m", f, off+1, uint64(len(pkt)))
	if err == nil {
		t.Fatal("a range that is not a packet was sent")
	}
	if err := tx.SendFd(ctx, "unix://"+path, "m", nil, 0, 1); err == nil {
		t.Fatal("nil file accepted")
	}
}
