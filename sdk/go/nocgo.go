//go:build !cgo

package tenso

import "io"

// Built without cgo (CGO_ENABLED=0, or cross-compiling without a C toolchain): libtenso
// cannot be called, so every function answers this error. The types, constants and pure-Go
// helpers (FromSlice, Values, NewBundle, ...) still work.
var errNoCgo = &Error{Status: ErrNotAvailable, Op: "tenso",
	Message: "the tenso Go package was built without cgo (CGO_ENABLED=0); it needs cgo and libtenso (pkg-config tenso)"}

var versionErr error = errNoCgo

// LibraryVersion is "" without cgo.
func LibraryVersion() string { return "" }

// LibraryPath is "" without cgo.
func LibraryPath() string { return "" }

// CheckVersion returns the error every function returns without cgo.
func CheckVersion() error { return errNoCgo }

func Loads(data []byte) (*Tensor, error)                           { return nil, errNoCgo }
func LoadFile(path string, mode LoadMode) (*Tensor, error)         { return nil, errNoCgo }
func Dumps(t *Tensor) ([]byte, error)                              { return nil, errNoCgo }
func DumpsInto(dst []byte, t *Tensor) (int, error)                 { return 0, errNoCgo }
func DumpsBound(t *Tensor) (int, error)                            { return 0, errNoCgo }
func SaveFile(path string, t *Tensor) error                        { return errNoCgo }
func DumpTo(w io.Writer, t *Tensor) (int64, error)                 { return 0, errNoCgo }
func ReadFrom(r io.Reader) (*Tensor, error)                        { return nil, errNoCgo }
func Inspect(data []byte) (PacketInfo, error)                      { return PacketInfo{}, errNoCgo }
func PacketLength(data []byte) (int, error)                        { return 0, errNoCgo }
func NewRagged(flat *Tensor, rowOffsets []uint64) (*Tensor, error) { return nil, errNoCgo }
func NewStrings(ss []string) (*Tensor, error)                      { return nil, errNoCgo }
func NewSparse(kind Kind, rows, cols uint64, data, indices, third *Tensor) (*Tensor, error) {
	return nil, errNoCgo
}
func NewQuantized(dtype DType, shape []uint64, packed []byte, q Quantization) (*Tensor, error) {
	return nil, errNoCgo
}
func Quantize(input *Tensor, qdtype DType, scheme QuantScheme, axis int, groupSize int) (*Tensor, error) {
	return nil, errNoCgo
}

func (t *Tensor) Dequantize() ([]float32, error) { return nil, errNoCgo }

func (o DecodeOptions) Loads(data []byte) (*Tensor, error)                   { return nil, errNoCgo }
func (o DecodeOptions) LoadFile(path string, mode LoadMode) (*Tensor, error) { return nil, errNoCgo }
func (o DecodeOptions) ReadPacket(r io.Reader) (*Tensor, error)              { return nil, errNoCgo }
func (o EncodeOptions) Dumps(t *Tensor) ([]byte, error)                      { return nil, errNoCgo }
func (o EncodeOptions) DumpsInto(dst []byte, t *Tensor) (int, error)         { return 0, errNoCgo }
func (o EncodeOptions) DumpsBound(t *Tensor) (int, error)                    { return 0, errNoCgo }
func (o EncodeOptions) SaveFile(path string, t *Tensor) error                { return errNoCgo }
func (o EncodeOptions) DumpTo(w io.Writer, t *Tensor) (int64, error)         { return 0, errNoCgo }
