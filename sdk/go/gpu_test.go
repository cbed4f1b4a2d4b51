//go:build cgo

package tenso

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

// The GPU tests run on libtenso's host backend: an emulated device in host memory running the
// same transfer code as CUDA. The backend is chosen once per process.
func hostGPU(t *testing.T) {
	t.Helper()
	if err := SelectGPUBackend(GPUBackendHost); err != nil {
		t.Fatal(err)
	}
}

func gpuFloats(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i)*0.75 - 3
	}
	return out
}

func TestGPUHostBackendDiscovery(t *testing.T) {
	hostGPU(t)
	if err := GPUAvailable(); err != nil {
		t.Fatal(err)
	}
	if GPUBackendInUse() != GPUBackendHost || GPUBackendHost.String() != "host" {
		t.Fatalf("backend %v", GPUBackendInUse())
	}
	n, err := GPUDeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("count %d %v", n, err)
	}
	info, err := GPUDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Device != 0 || info.Backend != GPUBackendHost || info.TotalMemory == 0 || info.GDS {
		t.Fatalf("info %+v", info)
	}
	if err := SelectGPUBackend(GPUBackendCUDA); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("switching backends after first use: %v", err)
	}
}

func TestGPULoadsRoundTripIsByteExact(t *testing.T) {
	hostGPU(t)
	x := gpuFloats(40 * 33)
	for _, enc := range []EncodeOptions{{}, {Integrity: true}, {Compress: true}} {
		packet := must(enc.Dumps(must(FromSlice([]int{40, 33}, x))))
		v, err := GPULoads(packet)
		if err != nil {
			t.Fatal(err)
		}
		d := v.Tensor
		if v.Path != GPUPathStaged || d.DType != Float32 || !slices.Equal(d.Shape, []uint64{40, 33}) || d.NBytes() != 40*33*4 {
			t.Fatalf("%+v", d)
		}
		host := must(d.Download())
		if got := must(Values[float32](host)); !slices.Equal(got, x) {
			t.Fatal("downloaded values differ")
		}
		back := must(d.Dumps(enc))
		if !bytes.Equal(back, packet) {
			t.Fatalf("Dumps from the device differs from the host encoder (%+v)", enc)
		}
		d.Close()
		if _, err := d.Dumps(enc); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("use after Close: %v", err)
		}
		if d.DataPtr() != 0 {
			t.Fatal("DataPtr after Close")
		}
	}
}

func TestGPUSmallChunks(t *testing.T) {
	hostGPU(t)
	x := make([]float64, 50000)
	for i := range x {
		x[i] = float64(i) / 7
	}
	packet := must(Dumps(must(FromSlice([]int{len(x)}, x))))
	v := must(GPUOptions{ChunkBytes: 4096, StagingBuffers: 3}.Loads(packet))
	defer v.Close()
	if got := must(Values[float64](must(v.Tensor.Download()))); !slices.Equal(got, x) {
		t.Fatal("values differ")
	}
}

func TestGPUBundle(t *testing.T) {
	hostGPU(t)
	w := gpuFloats(6)
	b := []int16{1, -2, 3}
	bundle := NewBundle(Entry{"w", must(FromSlice([]int{2, 3}, w))}, Entry{"b", must(FromSlice([]int{3}, b))})
	v := must(GPULoads(must(Dumps(bundle))))
	if v.Tensor != nil || len(v.Entries) != 2 {
		t.Fatalf("%+v", v)
	}
	if got := must(Values[float32](must(v.Get("w").Tensor.Download()))); !slices.Equal(got, w) {
		t.Fatal("w differs")
	}
	bt := v.Get("b").Tensor
	if got := must(Values[int16](must(bt.Download()))); !slices.Equal(got, b) {
		t.Fatal("b differs")
	}
	if v.Get("nope") != nil {
		t.Fatal("missing key found")
	}
	v.Close() // members share the bundle's memory
	if _, err := bt.Download(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("member after bundle Close: %v", err)
	}
}

func TestGPUReadPacketWritePacketAndFiles(t *testing.T) {
	hostGPU(t)
	x := gpuFloats(1000)
	packet := must(Dumps(must(FromSlice([]int{1000}, x))))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.Write(packet)
		w.Write(packet[:100]) // then a truncated packet
		w.Close()
	}()
	v, err := GPUOptions{}.ReadPacket(r)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := (GPUOptions{}).ReadPacket(r); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	wg.Wait()

	dir := t.TempDir()
	path := filepath.Join(dir, "x.tenso")
	f := must(os.Create(path))
	n, err := v.Tensor.WritePacket(f, EncodeOptions{Integrity: true})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := must(EncodeOptions{Integrity: true}.Dumps(must(FromSlice([]int{1000}, x))))
	if got := must(os.ReadFile(path)); !bytes.Equal(got, want) || n != uint64(len(want)) {
		t.Fatalf("file differs (%d bytes written)", n)
	}
	lf := must(GPUOptions{}.LoadFile(path))
	defer lf.Close()
	if lf.Path != GPUPathStaged || !slices.Equal(must(Values[float32](must(lf.Tensor.Download()))), x) {
		t.Fatalf("LoadFile: %+v", lf)
	}
	rf := must(os.Open(path))
	defer rf.Close()
	must(GPUOptions{}.ReadPacket(rf)).Close()
	if _, err := (GPUOptions{}).ReadPacket(rf); !errors.Is(err, io.EOF) {
		t.Fatalf("clean end: %v", err)
	}
	if _, err := (GPUOptions{}).LoadFile(filepath.Join(dir, "missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestGPUHostilePackets(t *testing.T) {
	hostGPU(t)
	packet := must(EncodeOptions{Integrity: true}.Dumps(must(FromSlice([]int{64}, gpuFloats(64)))))
	bad := slices.Clone(packet)
	bad[len(bad)-12] ^= 0x40
	for _, c := range []struct {
		data []byte
		want Status
	}{{bad, ErrChecksum}, {packet[:len(packet)-1], ErrTruncated}, {[]byte("NOPE0000"), ErrBadMagic}} {
		if _, err := GPULoads(c.data); !errors.Is(err, c.want) {
			t.Fatalf("want %v, got %v", c.want, err)
		}
	}
	if _, err := (GPUOptions{Decode: DecodeOptions{MaxPacketBytes: 64}}).Loads(packet); !errors.Is(err, ErrLimit) {
		t.Fatalf("limit: %v", err)
	}
}

func TestGPULoadsIntoCallersMemory(t *testing.T) {
	hostGPU(t)
	x := []uint32{5, 6, 7, 8}
	packet := must(Dumps(must(FromSlice([]int{4}, x))))
	dst := must(NewDeviceTensor(0, Uint32, []uint64{4}))
	defer dst.Close()
	n, err := GPUOptions{}.LoadsInto(dst.DataPtr(), 16, packet)
	if err != nil || n != 16 {
		t.Fatalf("%d %v", n, err)
	}
	if got := must(Values[uint32](must(dst.Download()))); !slices.Equal(got, x) {
		t.Fatal("values differ")
	}
	if _, err := (GPUOptions{}).LoadsInto(dst.DataPtr(), 8, packet); !errors.Is(err, ErrBufferTooSmall) {
		t.Fatalf("too small: %v", err)
	}
}

func TestGPUDLPackAndWrap(t *testing.T) {
	hostGPU(t)
	d := must(Upload(must(FromSlice([]int{2, 2}, []float32{1, 2, 3, 4})), 0))
	m := must(d.ToDLPack())
	imported := must(FromDLPack(m))
	defer imported.Close()
	if imported.DataPtr() != d.DataPtr() {
		t.Fatal("DLPack import copied")
	}
	d.Close() // the export holds its own reference
	if got := must(Values[float32](must(imported.Download()))); !slices.Equal(got, []float32{1, 2, 3, 4}) {
		t.Fatal("values differ")
	}
	// Host backend: host memory the caller owns, borrowed without a copy.
	buf := alignedBytes(12 * 8)
	for i := range 12 {
		buf[i*8] = byte(i)
	}
	wrapped := must(WrapDevicePointer(uintptr(unsafe.Pointer(&buf[0])), 0, Uint64, []uint64{3, 4}))
	want := make([]uint64, 12)
	for i := range want {
		want[i] = uint64(i)
	}
	if got := must(Values[uint64](must(wrapped.Download()))); !slices.Equal(got, want) {
		t.Fatal("wrapped values differ")
	}
	wrapped.Close()
	if buf[8] != 1 {
		t.Fatal("Close touched the caller's memory")
	}
}

func TestGPUIPC(t *testing.T) {
	hostGPU(t)
	x := gpuFloats(64)
	d := must(Upload(must(FromSlice([]int{8, 8}, x)), 0))
	defer d.Close()
	ref := must(d.IPCExport())
	if len(ref) != 106 {
		t.Fatalf("reference of %d bytes", len(ref))
	}
	opened := must(IPCOpen(ref, Float32, []uint64{8, 8}))
	defer opened.Close()
	if opened.Path != GPUPathIPC || !slices.Equal(must(Values[float32](must(opened.Download()))), x) {
		t.Fatal("opened reference differs")
	}
	if _, err := IPCOpen(ref, Float32, []uint64{8, 9}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("wrong shape: %v", err)
	}
	v := must(GPULoads(ref))
	defer v.Close()
	if v.Path != GPUPathIPC || v.Tensor.DType != Uint8 || v.Tensor.NBytes() != 256 {
		t.Fatalf("%+v", v.Tensor)
	}
}

func TestGPUDequantizeBitExact(t *testing.T) {
	hostGPU(t)
	x := make([]float32, 96)
	for i := range x {
		x[i] = (float32(i*37%101) - 50) / 13
	}
	in := must(FromSlice([]int{6, 16}, x))
	for _, qd := range []DType{QInt8, QUInt8, QInt4, QUInt4} {
		for _, sc := range []struct {
			s     QuantScheme
			axis  int
			group int
		}{{PerTensor, 0, 0}, {PerChannel, 0, 0}, {PerGroup, 0, 8}} {
			q := must(Quantize(in, qd, sc.s, sc.axis, sc.group))
			packet := must(Dumps(q))
			want := must(must(Loads(packet)).Dequantize())
			d := must(GPUOptions{}.Dequantize(packet, Float32))
			got := must(Values[float32](must(d.Download())))
			d.Close()
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v %v: element %d: %v != %v", qd, sc.s, i, got[i], want[i])
				}
			}
			v := must(GPUOptions{DequantizeTo: Float32}.Loads(packet))
			if !slices.Equal(must(Values[float32](must(v.Tensor.Download()))), want) {
				t.Fatal("Loads with DequantizeTo differs")
			}
			v.Close()
			if _, err := GPULoads(packet); !errors.Is(err, ErrUnsupportedKind) {
				t.Fatalf("quantized without DequantizeTo: %v", err)
			}
		}
	}
}

func TestGPUPoolStreamsAndGoroutines(t *testing.T) {
	hostGPU(t)
	if err := SetGPUPoolLimit(64 << 20); err != nil {
		t.Fatal(err)
	}
	packet := must(Dumps(must(FromSlice([]int{1 << 16}, gpuFloats(1<<16)))))
	must(GPULoads(packet)).Close()
	before := must(GPUPool())
	must(GPULoads(packet)).Close()
	after := must(GPUPool())
	if after.Hits <= before.Hits || after.LimitBytes != 64<<20 {
		t.Fatalf("pool %+v -> %+v", before, after)
	}

	s := must(NewGPUStream(0))
	defer s.Close()
	v := must(GPUOptions{Stream: s.Handle()}.Loads(packet))
	defer v.Close()
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	want := must(Dumps(must(FromSlice([]int{1 << 16}, gpuFloats(1<<16)))))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := v.Tensor.Dumps(EncodeOptions{})
			if err == nil && !bytes.Equal(got, want) {
				err = errors.New("concurrent Dumps differs")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestGPUCUDAUnavailable runs this binary again with TENSO_GPU_BACKEND=cuda: on a machine
// without a driver or device every call answers ErrGPUUnavailable with a message.
func TestGPUCUDAUnavailable(t *testing.T) {
	if os.Getenv("TENSO_GPU_CUDA_CHILD") == "1" {
		_, err := GPULoads(must(Dumps(must(FromSlice([]int{1}, []float32{1})))))
		if err == nil {
			os.Stdout.WriteString("CUDA-AVAILABLE\n")
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Status != ErrGPUUnavailable || e.Message == "" {
			t.Fatalf("want ErrGPUUnavailable with a message, got %v", err)
		}
		if err := GPUAvailable(); !errors.Is(err, ErrGPUUnavailable) {
			t.Fatalf("GPUAvailable: %v", err)
		}
		if GPUBackendInUse() != GPUBackendCUDA {
			t.Fatalf("backend %v", GPUBackendInUse())
		}
		os.Stdout.WriteString("CUDA-UNAVAILABLE\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUCUDAUnavailable$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TENSO_GPU_CUDA_CHILD=1", "TENSO_GPU_BACKEND=cuda")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("CUDA-UNAVAILABLE")) && !bytes.Contains(out, []byte("CUDA-AVAILABLE")) {
		t.Fatalf("child printed %s", out)
	}
}
