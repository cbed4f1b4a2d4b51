//go:build cgo

package tenso

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// safetensors dtype names (the manifest's) to ours.
var stDTypes = map[string]DType{
	"BOOL": Bool, "U8": Uint8, "I8": Int8, "I16": Int16, "U16": Uint16, "F16": Float16, "BF16": BFloat16,
	"I32": Int32, "U32": Uint32, "F32": Float32, "C64": Complex64, "F64": Float64, "I64": Int64, "U64": Uint64,
}

// Files written by the real safetensors and bintensors packages (tests/vectors/archive, see
// make_archive_vectors.py) read back tensor for tensor, byte for byte, metadata included.
func TestArchivePeerGoldenFiles(t *testing.T) {
	dir := filepath.Join(vectorsDir, "archive")
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Files map[string]struct {
			Metadata map[string]string `json:"metadata"`
			Tensors  map[string]struct {
				DType string   `json:"dtype"`
				Hex   string   `json:"hex"`
				Shape []uint64 `json:"shape"`
			} `json:"tensors"`
		} `json:"files"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Files) < 3 {
		t.Fatalf("manifest lists %d files", len(m.Files))
	}
	for file, want := range m.Files {
		a, err := OpenArchive(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if a.Len() != len(want.Tensors) {
			t.Errorf("%s: %d tensors, manifest %d", file, a.Len(), len(want.Tensors))
		}
		meta, err := a.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, kv := range meta {
			got[kv.Key] = kv.Value
		}
		if len(got) != len(want.Metadata) {
			t.Errorf("%s: metadata %v, manifest %v", file, got, want.Metadata)
		}
		for k, v := range want.Metadata {
			if got[k] != v {
				t.Errorf("%s: metadata %q = %q, manifest %q", file, k, got[k], v)
			}
		}
		for name, w := range want.Tensors {
			tt, err := a.GetByName(name, DecodeOptions{})
			if err != nil {
				t.Fatalf("%s/%s: %v", file, name, err)
			}
			body, _ := hex.DecodeString(w.Hex)
			dt, known := stDTypes[w.DType]
			if !known || tt.DType != dt || !slices.Equal(tt.Shape, w.Shape) && len(tt.Shape)+len(w.Shape) > 0 ||
				!slices.Equal(tt.Data, body) {
				t.Errorf("%s/%s: %v %v %x, manifest %s %v %s", file, name, tt.DType, tt.Shape, tt.Data, w.DType, w.Shape, w.Hex)
			}
			tt.Close()
		}
		a.Close()
	}
}
