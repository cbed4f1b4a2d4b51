//go:build cgo

package tenso_test

import (
	"context"
	"fmt"
	"time"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

// Two nodes on one host: a push and a pull over TLS 1.3 (the default).
func ExampleNode() {
	receiver, err := tenso.NewNode(tenso.NodeOptions{}) // listens on tls://127.0.0.1:<free port>
	if err != nil {
		panic(err)
	}
	defer receiver.Close()
	sender, err := tenso.NewNode(tenso.NodeOptions{NoListen: true})
	if err != nil {
		panic(err)
	}
	defer sender.Close()
	addr, _ := receiver.Addr() // "tls://<key fingerprint>@127.0.0.1:<port>"

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Push: returns once the receiver has queued it.
	if err := sender.Send(ctx, addr, "weights", tenso.Vector([]float32{1, 2, 3})); err != nil {
		panic(err)
	}
	msg, err := receiver.Receive(ctx)
	if err != nil {
		panic(err)
	}
	w, _ := tenso.Values[float32](msg.Tensor)
	fmt.Println(msg.Name, w)

	// Pull: the receiver publishes, the sender requests by name.
	_ = receiver.Publish("bias", tenso.Vector([]int64{7, 8}))
	bias, err := sender.Request(ctx, addr, "bias")
	if err != nil {
		panic(err)
	}
	defer bias.Close()
	b, _ := tenso.Values[int64](bias)
	fmt.Println(b)
	// Output:
	// weights [1 2 3]
	// [7 8]
}

// Pipelined pushes: Post returns once written (or, small, buffered); Flush writes what is
// buffered and waits for every acknowledgement.
func ExampleNode_Post() {
	receiver, err := tenso.NewNode(tenso.NodeOptions{})
	if err != nil {
		panic(err)
	}
	defer receiver.Close()
	sender, err := tenso.NewNode(tenso.NodeOptions{NoListen: true})
	if err != nil {
		panic(err)
	}
	defer sender.Close()
	addr, _ := receiver.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := int64(0); i < 3; i++ {
		if err := sender.Post(ctx, addr, "step", tenso.Vector([]int64{i})); err != nil {
			panic(err)
		}
	}
	if err := sender.Flush(ctx, addr); err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		msg, err := receiver.Receive(ctx)
		if err != nil {
			panic(err)
		}
		v, _ := tenso.Values[int64](msg.Tensor)
		fmt.Println(msg.Name, v)
	}
	// Output:
	// step [0]
	// step [1]
	// step [2]
}
