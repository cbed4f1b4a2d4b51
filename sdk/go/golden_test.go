//go:build cgo

package tenso

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The golden packets written by the pinned upstream tenso 0.24.0 (tests/vectors), shared
// with the C++, Python and Rust tests.
const vectorsDir = "../../tests/vectors"

type goldenOptions struct {
	Alignment      uint32 `json:"alignment"`
	CheckIntegrity bool   `json:"check_integrity"`
	Compress       bool   `json:"compress"`
}

type goldenEntry struct {
	Key   string       `json:"key"`
	Value *goldenValue `json:"value"`
}

type goldenValue struct {
	Kind  string   `json:"kind"`
	DType string   `json:"dtype"`
	Shape []uint64 `json:"shape"`
	Body  string   `json:"body_hex"`
	// bundle
	Entries []goldenEntry `json:"entries"`
	// sparse
	Components []*goldenValue `json:"components"`
	// quantized
	Scheme     string `json:"scheme"`
	Axis       int32  `json:"axis"`
	GroupSize  uint32 `json:"group_size"`
	Scales     string `json:"scales_hex"`
	ZeroPoints string `json:"zero_points_hex"`
	InputDType string `json:"input_dtype"`
	Input      string `json:"input_hex"`
	Dequant    string `json:"dequant_hex"`
	// string
	Strings []string `json:"strings"`
	// ragged
	Bundle     *goldenValue `json:"bundle"`
	Rows       []string     `json:"rows_hex"`
	RowLengths []uint64     `json:"row_lengths"`
	// gpu_ipc_ref
	Handle     string `json:"handle_hex"`
	UUID       string `json:"uuid_hex"`
	ByteOffset uint64 `json:"byte_offset"`
	NBytes     uint64 `json:"nbytes"`
}

type goldenCase struct {
	Name       string        `json:"name"`
	File       string        `json:"file"`
	Producer   string        `json:"producer"`
	Size       int           `json:"size"`
	Version    uint32        `json:"version"`
	Compressed bool          `json:"compressed"`
	Options    goldenOptions `json:"options"`
	Value      *goldenValue  `json:"value"`
	bytes      []byte
}

func (c *goldenCase) encodeOptions() EncodeOptions {
	return EncodeOptions{Alignment: c.Options.Alignment, Integrity: c.Options.CheckIntegrity, Compress: c.Options.Compress}
}

// byteExact: the case's packet must come back byte for byte (no LZ4 body, v4 layout).
func (c *goldenCase) byteExact() bool { return !c.Compressed && c.Version == ProtocolVersion }

func loadGolden(t testing.TB) []*goldenCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "manifest.json"))
	if err != nil {
		t.Fatalf("golden vectors: %v", err)
	}
	var m struct {
		Cases []*goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(m.Cases) == 0 {
		t.Fatal("manifest.json has no cases")
	}
	for _, c := range m.Cases {
		c.bytes, err = os.ReadFile(filepath.Join(vectorsDir, c.File))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if len(c.bytes) != c.Size {
			t.Fatalf("%s: file has %d bytes, manifest says %d", c.Name, len(c.bytes), c.Size)
		}
	}
	return m.Cases
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in the manifest: %v", err)
	}
	return b
}

func f32s(t testing.TB, s string) []float32 {
	b := unhex(t, s)
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func dtypeNamed(t testing.TB, name string) DType {
	d, err := ParseDType(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var schemes = map[string]QuantScheme{"per_tensor": PerTensor, "per_channel": PerChannel, "per_group": PerGroup}
var sparseKinds = map[string]Kind{"sparse_coo": KindSparseCOO, "sparse_csr": KindSparseCSR, "sparse_csc": KindSparseCSC}

// diffBytes says where two byte strings first differ ("" when equal).
func diffBytes(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	at := 0
	for at < len(got) && at < len(want) && got[at] == want[at] {
		at++
	}
	win := func(b []byte) string { return hex.EncodeToString(b[max(0, at-8):min(len(b), at+16)]) }
	return fmt.Sprintf("bytes differ at offset %d (got %d B, want %d B): got ...%s, want ...%s",
		at, len(got), len(want), win(got), win(want))
}

// checkValue compares a decoded Tensor with a manifest VALUE, recursively.
func checkValue(t *testing.T, where string, got *Tensor, v *goldenValue) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil tensor", where)
	}
	shapeIs := func(want []uint64) {
		if want == nil {
			want = []uint64{}
		}
		if !slices.Equal(got.Shape, want) {
			t.Errorf("%s: shape %v, want %v", where, got.Shape, want)
		}
	}
	switch v.Kind {
	case "dense":
		if got.Kind != KindDense || got.DType.String() != v.DType {
			t.Fatalf("%s: %v %v, want dense %s", where, got.Kind, got.DType, v.DType)
		}
		shapeIs(v.Shape)
		if d := diffBytes(got.Data, unhex(t, v.Body)); d != "" {
			t.Errorf("%s: body %s", where, d)
		}
	case "bundle":
		if got.Kind != KindBundle || len(got.Entries) != len(v.Entries) {
			t.Fatalf("%s: %v with %d entries, want a bundle of %d", where, got.Kind, len(got.Entries), len(v.Entries))
		}
		for i, e := range v.Entries {
			if got.Entries[i].Key != e.Key {
				t.Errorf("%s: entry %d key %q, want %q", where, i, got.Entries[i].Key, e.Key)
			}
			checkValue(t, where+"/"+e.Key, got.Entries[i].Value, e.Value)
		}
	case "sparse_coo", "sparse_csr", "sparse_csc":
		if got.Kind != sparseKinds[v.Kind] || len(got.Components) != 3 {
			t.Fatalf("%s: %v with %d components, want %s", where, got.Kind, len(got.Components), v.Kind)
		}
		shapeIs(v.Shape)
		for i, c := range v.Components {
			checkValue(t, fmt.Sprintf("%s/component%d", where, i), got.Components[i], c)
		}
	case "quantized":
		if got.Kind != KindQuantized || got.DType.String() != v.DType || got.Quant == nil {
			t.Fatalf("%s: %v %v, want quantized %s", where, got.Kind, got.DType, v.DType)
		}
		shapeIs(v.Shape)
		q := got.Quant
		if q.Scheme != schemes[v.Scheme] || q.Axis != v.Axis || q.GroupSize != v.GroupSize {
			t.Errorf("%s: scheme/axis/group %d/%d/%d, want %s/%d/%d", where, q.Scheme, q.Axis, q.GroupSize, v.Scheme, v.Axis, v.GroupSize)
		}
		if d := diffBytes(got.Data, unhex(t, v.Body)); d != "" {
			t.Errorf("%s: packed codes %s", where, d)
		}
		if d := diffBytes(AsBytes(q.Scales), unhex(t, v.Scales)); d != "" {
			t.Errorf("%s: scales %s", where, d)
		}
		if d := diffBytes(AsBytes(q.ZeroPoints), unhex(t, v.ZeroPoints)); d != "" {
			t.Errorf("%s: zero points %s", where, d)
		}
		deq, err := got.Dequantize()
		if err != nil {
			t.Fatalf("%s: Dequantize: %v", where, err)
		}
		if d := diffBytes(AsBytes(deq), unhex(t, v.Dequant)); d != "" {
			t.Errorf("%s: dequantized %s", where, d)
		}
	case "string":
		if got.Kind != KindString || got.DType != String {
			t.Fatalf("%s: %v %v, want a string tensor", where, got.Kind, got.DType)
		}
		shapeIs(v.Shape)
		ss, err := got.Strings()
		if err != nil {
			t.Fatalf("%s: Strings: %v", where, err)
		}
		if !slices.Equal(ss, v.Strings) && !(len(ss) == 0 && len(v.Strings) == 0) {
			t.Errorf("%s: strings %q, want %q", where, ss, v.Strings)
		}
	case "ragged":
		checkValue(t, where, got, v.Bundle)
		flat, offs, err := got.Ragged()
		if err != nil {
			t.Fatalf("%s: Ragged: %v", where, err)
		}
		if flat.DType.String() != v.DType || len(offs) != len(v.Rows)+1 {
			t.Fatalf("%s: ragged %v with %d offsets, want %s with %d rows", where, flat.DType, len(offs), v.DType, len(v.Rows))
		}
		size := uint64(flat.DType.ItemSize())
		for i, row := range v.Rows {
			if d := diffBytes(flat.Data[offs[i]*size:offs[i+1]*size], unhex(t, row)); d != "" {
				t.Errorf("%s: row %d %s", where, i, d)
			}
			if offs[i+1]-offs[i] != v.RowLengths[i] {
				t.Errorf("%s: row %d has %d elements, want %d", where, i, offs[i+1]-offs[i], v.RowLengths[i])
			}
		}
	case "gpu_ipc_ref":
		if got.Kind != KindGPUIPCRef || got.IPC == nil {
			t.Fatalf("%s: %v, want a GPU IPC reference", where, got.Kind)
		}
		r := got.IPC
		if hex.EncodeToString(r.Handle[:]) != v.Handle || hex.EncodeToString(r.DeviceUUID[:]) != v.UUID ||
			r.ByteOffset != v.ByteOffset || r.NBytes != v.NBytes {
			t.Errorf("%s: IPC ref %+v, want handle %s uuid %s offset %d nbytes %d", where, *r, v.Handle, v.UUID, v.ByteOffset, v.NBytes)
		}
	default:
		t.Fatalf("%s: unknown VALUE kind %q in the manifest", where, v.Kind)
	}
}

// buildValue constructs the manifest VALUE from scratch with the package's constructors.
func buildValue(t *testing.T, v *goldenValue) *Tensor {
	t.Helper()
	switch v.Kind {
	case "dense":
		return NewTensor(dtypeNamed(t, v.DType), v.Shape, unhex(t, v.Body))
	case "bundle":
		entries := make([]Entry, len(v.Entries))
		for i, e := range v.Entries {
			entries[i] = Entry{Key: e.Key, Value: buildValue(t, e.Value)}
		}
		return NewBundle(entries...)
	case "sparse_coo", "sparse_csr", "sparse_csc":
		c := v.Components
		s, err := NewSparse(sparseKinds[v.Kind], v.Shape[0], v.Shape[1], buildValue(t, c[0]), buildValue(t, c[1]), buildValue(t, c[2]))
		if err != nil {
			t.Fatalf("NewSparse: %v", err)
		}
		return s
	case "quantized":
		q, err := NewQuantized(dtypeNamed(t, v.DType), v.Shape, unhex(t, v.Body), Quantization{
			Scheme: schemes[v.Scheme], Axis: v.Axis, GroupSize: v.GroupSize,
			Scales: f32s(t, v.Scales), ZeroPoints: f32s(t, v.ZeroPoints),
		})
		if err != nil {
			t.Fatalf("NewQuantized: %v", err)
		}
		return q
	case "string":
		s, err := NewStrings(v.Strings)
		if err != nil {
			t.Fatalf("NewStrings: %v", err)
		}
		return s
	case "ragged":
		var flat []byte
		offsets := []uint64{0}
		for i, row := range v.Rows {
			flat = append(flat, unhex(t, row)...)
			offsets = append(offsets, offsets[i]+v.RowLengths[i])
		}
		r, err := NewRagged(NewTensor(dtypeNamed(t, v.DType), []uint64{offsets[len(offsets)-1]}, flat), offsets)
		if err != nil {
			t.Fatalf("NewRagged: %v", err)
		}
		return r
	case "gpu_ipc_ref":
		var ref IPCRef
		copy(ref.Handle[:], unhex(t, v.Handle))
		copy(ref.DeviceUUID[:], unhex(t, v.UUID))
		ref.ByteOffset, ref.NBytes = v.ByteOffset, v.NBytes
		return NewIPCRef(ref)
	}
	t.Fatalf("unknown VALUE kind %q", v.Kind)
	return nil
}

// checkEncoded: a re-encoded packet must be the golden bytes (byte-exact cases) or decode to
// the same value (compressed and legacy cases).
func checkEncoded(t *testing.T, c *goldenCase, how string, got []byte) {
	t.Helper()
	if c.byteExact() {
		if d := diffBytes(got, c.bytes); d != "" {
			t.Errorf("%s: %s", how, d)
		}
		return
	}
	back, err := Loads(got)
	if err != nil {
		t.Fatalf("%s: Loads of the re-encoded packet: %v", how, err)
	}
	checkValue(t, how, back, c.Value)
}

func TestGoldenDecode(t *testing.T) {
	for _, c := range loadGolden(t) {
		t.Run(c.Name, func(t *testing.T) {
			got, err := Loads(c.bytes)
			if err != nil {
				t.Fatalf("Loads: %v", err)
			}
			if got.OwnsCMemory() {
				t.Error("a Tensor from Loads must not hold C memory")
			}
			if got.PacketSize != uint64(c.Size) || got.Version != c.Version {
				t.Errorf("packet size %d version %d, want %d and %d", got.PacketSize, got.Version, c.Size, c.Version)
			}
			checkValue(t, c.Name, got, c.Value)

			// Zero copy: an uncompressed dense body is a sub-slice of the input.
			if got.Kind == KindDense && !c.Compressed && len(got.Data) > 0 &&
				&got.Data[0] != &c.bytes[len(c.bytes)-len(got.Data)-int(footer(got))] {
				t.Error("the body of an uncompressed dense packet is not aliased from the input")
			}

			// Trailing bytes are ignored, and framing finds the exact length.
			padded := append(slices.Clone(c.bytes), 0xAB, 0xCD, 0xEF)
			if again, err := Loads(padded); err != nil {
				t.Errorf("Loads with trailing bytes: %v", err)
			} else {
				checkValue(t, c.Name+" (trailing bytes)", again, c.Value)
			}
			if n, err := PacketLength(padded); err != nil || n != c.Size {
				t.Errorf("PacketLength = %d, %v; want %d", n, err, c.Size)
			}
			if n, err := PacketLength(c.bytes[:c.Size-1]); !errors.Is(err, ErrTruncated) || n <= c.Size-1 || n > c.Size {
				t.Errorf("PacketLength(size-1) = %d, %v; want ErrTruncated and %d < n <= %d", n, err, c.Size-1, c.Size)
			}
			info, err := Inspect(c.bytes)
			if err != nil || info.PacketSize != uint64(c.Size) || info.Kind != got.Kind || info.Version != c.Version {
				t.Errorf("Inspect = %+v, %v", info, err)
			}
			if _, err := Loads(c.bytes[:c.Size-1]); !errors.Is(err, ErrTruncated) {
				t.Errorf("Loads(size-1) = %v, want ErrTruncated", err)
			}
		})
	}
}

// footer is the integrity footer length after a dense body.
func footer(t *Tensor) int {
	if t.Flags&FlagIntegrity != 0 {
		return 8
	}
	return 0
}

func TestGoldenReencode(t *testing.T) {
	for _, c := range loadGolden(t) {
		t.Run(c.Name, func(t *testing.T) {
			opts := c.encodeOptions()
			decoded, err := Loads(c.bytes)
			if err != nil {
				t.Fatalf("Loads: %v", err)
			}

			// The decoded tensor, written again with the case's options.
			out, err := opts.Dumps(decoded)
			if err != nil {
				t.Fatalf("Dumps(decoded): %v", err)
			}
			checkEncoded(t, c, "Dumps(decoded)", out)

			// The same value built from the manifest with the constructors.
			built := buildValue(t, c.Value)
			out, err = opts.Dumps(built)
			if err != nil {
				t.Fatalf("Dumps(built): %v", err)
			}
			checkEncoded(t, c, "Dumps(built)", out)

			// As the relay does it: the options come from the decoded packet itself.
			out, err = EncodeOptions{AsDecoded: true}.Dumps(decoded)
			if err != nil {
				t.Fatalf("Dumps(AsDecoded): %v", err)
			}
			checkEncoded(t, c, "Dumps(AsDecoded)", out)

			// Every other entry point.
			bound, err := opts.DumpsBound(built)
			if err != nil {
				t.Fatalf("DumpsBound: %v", err)
			}
			if c.byteExact() && bound != c.Size {
				t.Errorf("DumpsBound = %d, want %d", bound, c.Size)
			}
			dst := alignedBytes(bound)
			n, err := opts.DumpsInto(dst, built)
			if err != nil {
				t.Fatalf("DumpsInto: %v", err)
			}
			checkEncoded(t, c, "DumpsInto", dst[:n])
			if c.byteExact() {
				small := make([]byte, c.Size-1)
				if n, err := opts.DumpsInto(small, built); !errors.Is(err, ErrBufferTooSmall) || n != c.Size {
					t.Errorf("DumpsInto(size-1) = %d, %v; want ErrBufferTooSmall and %d", n, err, c.Size)
				}
			}
			var buf bytes.Buffer
			if _, err := opts.DumpTo(&buf, built); err != nil {
				t.Fatalf("DumpTo(bytes.Buffer): %v", err)
			}
			checkEncoded(t, c, "DumpTo(bytes.Buffer)", buf.Bytes())

			path := filepath.Join(t.TempDir(), c.File)
			if err := opts.SaveFile(path, built); err != nil {
				t.Fatalf("SaveFile: %v", err)
			}
			saved, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			checkEncoded(t, c, "SaveFile", saved)

			// Quantized: quantizing upstream's float input gives upstream's packet.
			if v := c.Value; v.Kind == "quantized" {
				in := NewTensor(dtypeNamed(t, v.InputDType), v.Shape, unhex(t, v.Input))
				q, err := Quantize(in, dtypeNamed(t, v.DType), schemes[v.Scheme], int(v.Axis), int(v.GroupSize))
				if err != nil {
					t.Fatalf("Quantize: %v", err)
				}
				out, err := opts.Dumps(q)
				if err != nil {
					t.Fatalf("Dumps(Quantize): %v", err)
				}
				checkEncoded(t, c, "Dumps(Quantize(input))", out)
			}
		})
	}
}

// Files: saved golden packets load back through both modes, and Close frees the view.
func TestGoldenLoadFile(t *testing.T) {
	dir := t.TempDir()
	before := cLiveViewsForTest()
	for _, c := range loadGolden(t) {
		path := filepath.Join(dir, c.File)
		if err := os.WriteFile(path, c.bytes, 0o644); err != nil {
			t.Fatal(err)
		}
		// mode 2: LoadFileAliased (the mapping, owned by the Tensor); the others are Go memory.
		for _, mode := range []LoadMode{LoadRead, LoadMmap, 2} {
			var got *Tensor
			var err error
			if mode == 2 {
				got, err = LoadFileAliased(path)
			} else {
				got, err = LoadFile(path, mode)
			}
			if err != nil {
				t.Fatalf("%s: LoadFile(%d): %v", c.Name, mode, err)
			}
			if got.OwnsCMemory() != (mode == 2) {
				t.Errorf("%s: mode %d: OwnsCMemory() = %v", c.Name, mode, got.OwnsCMemory())
			}
			checkValue(t, fmt.Sprintf("%s (LoadFile mode %d)", c.Name, mode), got, c.Value)
			if c.byteExact() {
				out, err := EncodeOptions{AsDecoded: true}.Dumps(got)
				if err != nil {
					t.Fatalf("%s: Dumps: %v", c.Name, err)
				}
				if d := diffBytes(out, c.bytes); d != "" {
					t.Errorf("%s: re-encoded from a file: %s", c.Name, d)
				}
			}
			got.Close()
			got.Close() // idempotent
		}
	}
	if after := cLiveViewsForTest(); after != before {
		t.Errorf("%d views still alive after Close", after-before)
	}
}
