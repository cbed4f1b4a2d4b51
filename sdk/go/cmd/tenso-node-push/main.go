// Command tenso-node-push is the Go end of the cross-language node test (tests/interop/
// nodes.py): it starts a Go node that only dials, prints its key fingerprint (the sender the
// receiver must see), pushes the test values to the node at ADDR over TLS, one after the other
// (each returns once the receiver has queued it), and exits.
//
// The values are those of tests/interop/nodes.py, whose bytes every language computes the same
// way: byte i of the value with seed s is (i*131 + s*17 + i/251) mod 256.
//
// Exit status: 0 when every push was acknowledged, 1 on any error, 2 on bad usage.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + seed*17 + i/251)
	}
	return b
}

func dense(dt tenso.DType, itemsize int, seed int, shape ...uint64) *tenso.Tensor {
	n := itemsize
	for _, d := range shape {
		n *= int(d)
	}
	return tenso.NewTensor(dt, shape, pattern(seed, n))
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tenso-node-push ADDR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "tenso-node-push:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	node, err := tenso.NewNode(tenso.NodeOptions{NoListen: true})
	if err != nil {
		return err
	}
	defer node.Close()
	id, err := node.ID()
	if err != nil {
		return err
	}
	fmt.Println(id)
	values := []struct {
		name string
		t    *tenso.Tensor
	}{
		{"u8", dense(tenso.Uint8, 1, 1, 1000)},
		{"f32", dense(tenso.Float32, 4, 2, 64, 64)},
		{"i64", dense(tenso.Int64, 8, 3, 3, 5, 7)},
		{"big", dense(tenso.Uint8, 1, 4, 16<<20)},
		{"empty", dense(tenso.Float64, 8, 5, 0, 3)},
		{"bundle", tenso.NewBundle(
			tenso.Entry{Key: "a", Value: dense(tenso.Int16, 2, 6, 10)},
			tenso.Entry{Key: "b", Value: dense(tenso.Float64, 8, 7, 4)},
		)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for _, v := range values {
		if err := node.Send(ctx, addr, v.name, v.t); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}
	return nil
}
