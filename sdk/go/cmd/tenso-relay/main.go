// Command tenso-relay is the Go link of the cross-language chain (Python -> Go -> Rust -> C
// and back): it reads Tenso packets from standard input, decodes each one, encodes it again
// with the options it was written with (EncodeOptions.AsDecoded) and writes it to standard
// output, until the input ends between two packets.
//
// Exit status: 0 at a clean end of stream, 1 on any error (reported on standard error with
// the index of the packet), 2 on bad usage.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: tenso-relay < packets > packets")
		os.Exit(2)
	}
	n, err := relay(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tenso-relay: packet %d: %v\n", n, err)
		os.Exit(1)
	}
}

// relay copies packets from in to out, decoded and re-encoded; it returns how many it relayed.
func relay(in io.Reader, out io.Writer) (int, error) {
	enc := tenso.EncodeOptions{AsDecoded: true}
	for i := 0; ; i++ {
		t, err := tenso.ReadFrom(in)
		if errors.Is(err, tenso.ErrEndOfStream) {
			return i, nil
		}
		if err != nil {
			return i, err
		}
		_, err = enc.DumpTo(out, t)
		t.Close()
		if err != nil {
			return i, err
		}
	}
}
