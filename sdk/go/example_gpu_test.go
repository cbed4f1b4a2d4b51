//go:build cgo

package tenso_test

import (
	"fmt"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

// A packet straight into device memory and back. The host backend (an emulated device in
// host memory) runs the same transfer code as CUDA, so this runs on machines without a GPU;
// leave SelectGPUBackend out (or set TENSO_GPU_BACKEND) to use CUDA devices.
func ExampleGPULoads() {
	if err := tenso.SelectGPUBackend(tenso.GPUBackendHost); err != nil {
		panic(err)
	}
	packet := must(tenso.Dumps(must(tenso.FromSlice([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}))))

	v, err := tenso.GPULoads(packet) // staged through pinned buffers, double-buffered
	if err != nil {
		panic(err)
	}
	defer v.Close() // frees the device memory
	d := v.Tensor
	fmt.Println(d.DType, d.Shape, d.NBytes(), d.Path == tenso.GPUPathStaged)

	// DataPtr is the device address, for CUDA libraries; it stays the DeviceTensor's.
	_ = d.DataPtr()

	back := must(d.Dumps(tenso.EncodeOptions{})) // device -> packet: the same bytes
	fmt.Println(string(back) == string(packet))
	host := must(d.Download())
	fmt.Println(must(tenso.Values[float32](host)))
	// Output:
	// float32 [2 3] 24 true
	// true
	// [1 2 3 4 5 6]
}

// Another process opens the device memory from a 106-byte IPC reference packet.
func ExampleDeviceTensor_IPCExport() {
	if err := tenso.SelectGPUBackend(tenso.GPUBackendHost); err != nil {
		panic(err)
	}
	d := must(tenso.Upload(must(tenso.FromSlice([]int{4}, []int32{7, 8, 9, 10})), 0))
	defer d.Close() // the exporter keeps the memory alive while others use it
	ref := must(d.IPCExport())

	opened := must(tenso.IPCOpen(ref, tenso.Int32, []uint64{4})) // in the other process
	defer opened.Close()
	fmt.Println(len(ref), must(tenso.Values[int32](must(opened.Download()))))
	// Output: 106 [7 8 9 10]
}
