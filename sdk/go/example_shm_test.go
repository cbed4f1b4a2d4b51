//go:build cgo

package tenso_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

func ExampleCreateShmFor() {
	name := fmt.Sprintf("/tenso-example-shm-%d", os.Getpid())
	w := must(tenso.FromSlice([]int{2, 2}, []float32{1, 2, 3, 4}))
	seg, n, err := tenso.CreateShmFor(name, w, false) // one copy, straight into shared memory
	if err != nil {
		panic(err)
	}
	defer tenso.UnlinkShm(name)
	defer seg.Close()

	// Any process on the host: open by name and decode in place.
	r, err := tenso.OpenShm(name, false)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	t, err := r.Get(tenso.DecodeOptions{}) // aliases the mapping: Close when done
	if err != nil {
		panic(err)
	}
	defer t.Close()
	vals, _ := tenso.Values[float32](t)
	_, err = tenso.CreateShm(name, 64, false)
	fmt.Println(n, t.Shape, vals, errors.Is(err, tenso.ErrExists))
	// Output: 80 [2 2] [1 2 3 4] true
}

func ExampleCache() {
	name := fmt.Sprintf("/tenso-example-cache-%d", os.Getpid())
	cache, err := tenso.CreateCache(name, tenso.CacheOptions{Size: 8 << 20, Replace: true})
	if err != nil {
		panic(err)
	}
	defer tenso.UnlinkCache(name)
	defer cache.Close()

	w := must(tenso.FromSlice([]int{2, 3}, []float64{1, 2, 3, 4, 5, 6}))
	if _, err := cache.Put("layer0/w", w, 0, tenso.EncodeOptions{}); err != nil {
		panic(err)
	}
	if _, err := cache.Put("tmp", tenso.Vector([]uint8{1}), time.Minute, tenso.EncodeOptions{}); err != nil {
		panic(err)
	}

	// Other processes use tenso.OpenCache(name, ...). Get copies into Go memory; GetAliased
	// reads in place, a CacheView that pins its entry until Close.
	v, err := cache.GetAliased("layer0/w", tenso.DecodeOptions{})
	if err != nil {
		panic(err)
	}
	_ = cache.Delete("layer0/w") // hidden at once, but the pinned bytes stay
	vals, _ := tenso.Values[float64](v.Tensor)
	fmt.Println(v.Shape, vals)
	v.Close() // releases the pin

	_, err = cache.Get("layer0/w", tenso.DecodeOptions{})
	keys, _ := cache.Keys()
	st, _ := cache.Stats()
	fmt.Println(errors.Is(err, tenso.ErrNotFound), keys, st.Hits, st.Misses)
	// Output:
	// [2 3] [1 2 3 4 5 6]
	// true [tmp] 1 1
}

func ExampleArchiveWriter() {
	dir, _ := os.MkdirTemp("", "tenso-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors") // the format follows the extension

	w, err := tenso.CreateArchive(path)
	if err != nil {
		panic(err)
	}
	defer w.Close() // discards the file unless Finish succeeded
	_ = w.Add("w", must(tenso.FromSlice([]int{2, 2}, []float32{1, 2, 3, 4})))
	_ = w.Add("b", tenso.Vector([]int64{7, 8}))
	_ = w.SetMetadata("framework", "go")
	if err := w.Finish(); err != nil { // index, fsync, rename
		panic(err)
	}

	a, err := tenso.OpenArchive(path)
	if err != nil {
		panic(err)
	}
	defer a.Close()
	entries, _ := a.Entries()
	for _, e := range entries {
		fmt.Println(e.Name, e.DType, e.Shape)
	}
	b, _ := a.GetByName("b", tenso.DecodeOptions{}) // zero copy from the mapping
	defer b.Close()
	vals, _ := tenso.Values[int64](b)
	fw, _ := a.MetadataValue("framework")
	fmt.Println(a.Format(), vals, fw)
	// Output:
	// b int64 [2]
	// w float32 [2 2]
	// safetensors [7 8] go
}
