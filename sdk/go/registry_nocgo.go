//go:build !cgo

package tenso

import (
	"context"
	"os"
)

// DTypes is empty without cgo: the registry is libtenso's.
func DTypes() []DType { return nil }

// Kinds is empty without cgo: the registry is libtenso's.
func Kinds() []Kind { return nil }

// ParseKind needs libtenso.
func ParseKind(name string) (Kind, error) { return 0, errNoCgo }

func dtypeKind(d DType) Kind          { return 0 }
func dtypeBits(d DType) int           { return 0 }
func backendName(b GPUBackend) string { return "none" }

// LoadsEntry needs libtenso.
func LoadsEntry(data []byte, key string) (*Tensor, error) { return nil, errNoCgo }

// LoadsEntry needs libtenso.
func (o DecodeOptions) LoadsEntry(data []byte, key string) (*Tensor, error) { return nil, errNoCgo }

// ReadFd needs libtenso.
func (o DecodeOptions) ReadFd(f *os.File) (*Tensor, error) { return nil, errNoCgo }

// SendFd needs libtenso.
func (n *Node) SendFd(ctx context.Context, addr, name string, f *os.File, offset, length uint64) error {
	return errNoCgo
}

// ReceiveFd needs libtenso.
func (n *Node) ReceiveFd() (uintptr, error) { return 0, errNoCgo }

// ReceiveFunc needs libtenso.
func (n *Node) ReceiveFunc(ctx context.Context, fn func(m *Message) error) error { return errNoCgo }
