//go:build cgo

package tenso

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// shmName is a segment name unique to this process and test, unlinked when the test ends.
func shmName(t *testing.T, cache bool) string {
	t.Helper()
	kind := "shm"
	if cache {
		kind = "cache"
	}
	name := fmt.Sprintf("/tenso-go-%s-%s-%d", t.Name(), kind, os.Getpid())
	t.Cleanup(func() {
		if cache {
			_ = UnlinkCache(name)
		} else {
			_ = UnlinkShm(name)
		}
	})
	return name
}

func rampF32(n int, seed float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i)*0.5 + seed
	}
	return out
}

func TestShmRoundTripZeroCopy(t *testing.T) {
	name := shmName(t, false)
	w := rampF32(1000, 1)
	m := must(FromSlice([]int{10, 100}, w))
	opts := EncodeOptions{Integrity: true}
	s, n, err := opts.CreateShm(name, m, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, _ := opts.Dumps(m)
	if n != uint64(len(want)) || !slices.Equal(s.Bytes()[:n], want) {
		t.Fatalf("CreateShmFor wrote %d bytes, want the packet of %d at byte 0", n, len(want))
	}
	if !s.Writable() || s.Name() != name || s.Size() < n {
		t.Fatalf("writable %v name %q size %d", s.Writable(), s.Name(), s.Size())
	}

	r, err := OpenShm(name, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.GetAliased(DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := Values[float32](got)
	if !slices.Equal(vals, w) || !slices.Equal(got.Shape, []uint64{10, 100}) {
		t.Fatalf("got %v", got.Shape)
	}
	seg := r.BytesAliased()
	if p := uintptr(unsafe.Pointer(&got.Data[0])); p < uintptr(unsafe.Pointer(&seg[0])) || p >= uintptr(unsafe.Pointer(&seg[0]))+uintptr(len(seg)) {
		t.Fatal("the Tensor does not alias the mapping")
	}
	if !got.OwnsCMemory() {
		t.Fatal("a segment view must be closed")
	}

	wantStatus(t, "CreateShm taken", func() error { _, err := CreateShm(name, 64, false); return err }(), ErrExists)
	wantStatus(t, "Put read-only", func() error { _, err := r.Put(m, EncodeOptions{}); return err }(), ErrInvalidArgument)
	r.Close()
	if err := UnlinkShm(name); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "OpenShm unlinked", func() error { _, err := OpenShm(name, false); return err }(), ErrNotFound)
	wantStatus(t, "UnlinkShm twice", UnlinkShm(name), ErrNotFound)
	// The view still holds the mapping after the handle is closed and the name unlinked.
	if v, _ := Values[float32](got); v[999] != w[999] {
		t.Fatal("view changed")
	}
	got.Close()
	wantStatus(t, "Get after Close", func() error { _, err := r.Get(DecodeOptions{}); return err }(), ErrInvalidArgument)
}

// Bytes is Go memory: it stays readable after Close and after the Shm is collected (the
// mapping is gone by then: an alias of it faults). BytesAliased points into the mapping.
func TestShmBytesCopyAndAliased(t *testing.T) {
	name := shmName(t, false)
	m := Vector(rampF32(1000, 2))
	want := must(Dumps(m))
	afterClose := func() []byte {
		s, _, err := CreateShmFor(name, m, true)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.Bytes()
	}()
	collected := func() []byte {
		s, _, err := CreateShmFor(name, m, true)
		if err != nil {
			t.Fatal(err)
		}
		return s.Bytes() // s becomes unreachable: its cleanup unmaps the segment
	}()
	runtime.GC()
	runtime.GC()
	for what, b := range map[string][]byte{"after Close": afterClose, "after GC": collected} {
		if len(b) < len(want) || !slices.Equal(b[:len(want)], want) {
			t.Fatalf("Bytes %s: %d bytes, not the packet", what, len(b))
		}
	}

	s, _, err := CreateShmFor(name, m, true)
	if err != nil {
		t.Fatal(err)
	}
	copied, aliased := s.Bytes(), s.BytesAliased()
	if !slices.Equal(copied, aliased) || len(aliased) != int(s.Size()) {
		t.Fatalf("Bytes and BytesAliased differ (%d, %d bytes)", len(copied), len(aliased))
	}
	if &copied[0] == &aliased[0] {
		t.Fatal("Bytes must not alias the mapping")
	}
	aliased[0] ^= 0xff // the mapping itself: a new Bytes sees the write
	if s.Bytes()[0] != copied[0]^0xff {
		t.Fatal("BytesAliased does not point into the mapping")
	}
	runtime.KeepAlive(s)
	s.Close()
	if s.Bytes() != nil || s.BytesAliased() != nil {
		t.Fatal("a closed Shm has no bytes")
	}
}

// Another uid's objects are refused unless AnyOwner (checked in the C tests, which run as two
// uids); here the options reach libtenso and an own segment or pool opens either way.
func TestOpenAnyOwner(t *testing.T) {
	name, pool := shmName(t, false), shmName(t, true)
	w, err := CreateShm(name, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err := CreateCache(pool, CacheOptions{Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, anyOwner := range []bool{false, true} {
		s, err := OpenShmWith(name, ShmOpenOptions{Writable: true, AnyOwner: anyOwner})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(must(FromSlice([]int{2}, []uint8{1, 2})), EncodeOptions{}); err != nil || !s.Writable() {
			t.Fatalf("AnyOwner %v: put %v, writable %v", anyOwner, err, s.Writable())
		}
		s.Close()
		o, err := OpenCache(pool, CacheOptions{AnyOwner: anyOwner})
		if err != nil {
			t.Fatal(err)
		}
		o.Close()
	}
}

func TestShmPutTooSmallAndReplace(t *testing.T) {
	name := shmName(t, false)
	s, err := CreateShm(name, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantStatus(t, "Get of zeros", func() error { _, err := s.Get(DecodeOptions{}); return err }(), ErrBadMagic)
	big := Vector(rampF32(2000, 0))
	n, err := s.Put(big, EncodeOptions{})
	wantStatus(t, "Put too big", err, ErrBufferTooSmall)
	if want, _ := DumpsBound(big); n != uint64(want) {
		t.Fatalf("needed %d, want %d", n, want)
	}
	if slices.ContainsFunc(s.Bytes(), func(b byte) bool { return b != 0 }) {
		t.Fatal("a failed Put changed the segment")
	}
	// A large packet, then a smaller compressed one: framed exactly despite the stale bytes.
	if _, err := s.Put(Vector(make([]uint8, 3000)), EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	small := make([]uint16, 1000)
	for i := range small {
		small[i] = 7
	}
	if _, err := s.Put(Vector(small), EncodeOptions{Compress: true}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Values[uint16](got); !slices.Equal(v, small) {
		t.Fatal("compressed round trip")
	}
	got.Close()
	fresh, err := CreateShm(name, 128, true)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if fresh.Size() != 128 {
		t.Fatal(fresh.Size())
	}
	wantStatus(t, "bad name", func() error { _, err := CreateShm("/a/b", 64, false); return err }(), ErrInvalidArgument)
	wantStatus(t, "NUL name", func() error { _, err := CreateShm("a\x00b", 64, false); return err }(), ErrInvalidArgument)
}

func newCache(t *testing.T, size uint64) (*Cache, string) {
	t.Helper()
	name := shmName(t, true)
	c, err := CreateCache(name, CacheOptions{Size: size, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, name
}

func TestCacheRoundTripAndBookkeeping(t *testing.T) {
	c, name := newCache(t, 8<<20)
	if c.Name() != name {
		t.Fatal(c.Name())
	}
	w := rampF32(4096, 2)
	n, err := c.Put("w", must(FromSlice([]int{64, 64}, w)), 0, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Dumps(must(FromSlice([]int{64, 64}, w))); n != uint64(len(want)) {
		t.Fatalf("Put wrote %d, want %d", n, len(want))
	}
	ss, _ := NewStrings([]string{"a", "bc"})
	if _, err := c.Put("s", ss, time.Hour, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "Get missing", func() error { _, err := c.Get("missing", DecodeOptions{}); return err }(), ErrNotFound)
	wantStatus(t, "Delete missing", c.Delete("missing"), ErrNotFound)
	wantStatus(t, "Info missing", func() error { _, err := c.Info("missing"); return err }(), ErrNotFound)

	v, err := c.GetAliased("w", DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Values[float32](v.Tensor); !slices.Equal(got, w) {
		t.Fatal("values")
	}
	if uintptr(unsafe.Pointer(&v.Data[0]))%64 != 0 {
		t.Fatal("bodies sit 64-aligned in the pool")
	}
	info, err := c.Info("w")
	if err != nil || info.Pins != 1 || info.TTL != 0 || !slices.Equal(info.Packet.Shape, []uint64{64, 64}) || info.AllocBytes < n {
		t.Fatalf("%+v %v", info, err)
	}
	if si, _ := c.Info("s"); si.TTL != time.Hour || si.Packet.Kind != KindString {
		t.Fatalf("%+v", si)
	}
	v.Close()
	v.Close() // idempotent
	if info, _ := c.Info("w"); info.Pins != 0 {
		t.Fatal("Close did not release the pin")
	}
	keys, err := c.Keys()
	if err != nil || !slices.Equal(keys, []string{"w", "s"}) {
		t.Fatalf("Keys = %q, %v (most recently used first)", keys, err)
	}
	st, _ := c.Stats()
	if st.Entries != 2 || st.Hits != 1 || st.Misses != 1 || st.HitRate() != 0.5 || st.Clients != 1 {
		t.Fatalf("%+v", st)
	}
	if ok, _ := c.Contains("s"); !ok {
		t.Fatal("Contains")
	}
	if err := c.Delete("w"); err != nil {
		t.Fatal(err)
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if keys, _ := c.Keys(); len(keys) != 0 {
		t.Fatal(keys)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestCacheExactErrors(t *testing.T) {
	c, name := newCache(t, 1<<20)
	wantStatus(t, "create taken", func() error { _, err := CreateCache(name, CacheOptions{}); return err }(), ErrExists)
	missing := shmName(t, true) + "-missing"
	wantStatus(t, "open missing", func() error { _, err := OpenCache(missing, CacheOptions{}); return err }(), ErrNotFound)
	one := Vector([]uint8{1})
	wantStatus(t, "empty key", func() error { _, err := c.Put("", one, 0, EncodeOptions{}); return err }(), ErrInvalidArgument)
	if _, err := c.Put(fmt.Sprintf("%0*d", MaxCacheKeyBytes, 0), one, 0, EncodeOptions{}); err != nil {
		t.Fatalf("a %d-byte key: %v", MaxCacheKeyBytes, err)
	}
	wantStatus(t, "long key", func() error {
		_, err := c.Put(fmt.Sprintf("%0*d", MaxCacheKeyBytes+1, 0), one, 0, EncodeOptions{})
		return err
	}(), ErrInvalidArgument)
	wantStatus(t, "negative ttl", func() error { _, err := c.Put("k", one, -time.Second, EncodeOptions{}); return err }(), ErrInvalidArgument)
	wantStatus(t, "bigger than the pool", func() error {
		_, err := c.Put("big", Vector(make([]uint8, 2<<20)), 0, EncodeOptions{})
		return err
	}(), ErrFull)

	// Pinned entries are never evicted: with all of them pinned the pool fills up.
	chunk := make([]uint8, 200<<10)
	var views []*CacheView
	var full error
	for i := 0; i < 16 && full == nil; i++ {
		key := fmt.Sprintf("p%d", i)
		if _, full = c.Put(key, Vector(chunk), 0, EncodeOptions{}); full == nil {
			v, err := c.GetAliased(key, DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			views = append(views, v)
		}
	}
	wantStatus(t, "all pinned", full, ErrFull)
	for _, v := range views {
		v.Close()
	}
	if _, err := c.Put("after", Vector(chunk), 0, EncodeOptions{}); err != nil {
		t.Fatalf("eviction after unpinning: %v", err)
	}
	if st, _ := c.Stats(); st.Evictions == 0 {
		t.Fatal("no eviction counted")
	}
	plain := shmName(t, false)
	seg, err := CreateShm(plain, 1<<16, false)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	wantStatus(t, "not a cache", func() error { _, err := OpenCache(plain, CacheOptions{}); return err }(), ErrCorrupt)
}

func TestCachePinsSurviveDeleteAndClose(t *testing.T) {
	c, name := newCache(t, 4<<20)
	a := rampF32(10000, 3)
	if _, err := c.Put("a", Vector(a), 0, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	v, err := c.GetAliased("a", DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := c.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Contains("a"); ok {
		t.Fatal("a deleted key is hidden at once")
	}
	filler := make([]uint8, 100<<10)
	for i := 0; i < 60; i++ {
		if _, err := c.Put(fmt.Sprintf("f%d", i), Vector(filler), 0, EncodeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if got, _ := Values[float32](v.Tensor); !slices.Equal(got, a) {
		t.Fatal("pinned bytes changed")
	}
	other, err := OpenCache(name, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if st, _ := other.Stats(); st.PinnedEntries != 1 {
		t.Fatalf("%+v", st)
	}
	v.Close()
	if st, _ := other.Stats(); st.PinnedEntries != 0 {
		t.Fatalf("%+v", st)
	}
	if err := other.Check(); err != nil {
		t.Fatal(err)
	}
}

// No assertion races the clock: "present" only for an hour-long TTL, "expired" only after
// sleeping four times a short one (the expiration count shows the short entry was stored).
func TestCacheTTL(t *testing.T) {
	c, _ := newCache(t, 1<<20)
	if _, err := c.Put("short", Vector([]uint8{1}), 50*time.Millisecond, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put("long", Vector([]uint8{2}), time.Hour, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Contains("long"); !ok || err != nil {
		t.Fatalf("long: %v, %v", ok, err)
	}
	time.Sleep(200 * time.Millisecond)
	wantStatus(t, "expired", func() error { _, err := c.Get("short", DecodeOptions{}); return err }(), ErrNotFound)
	if keys, _ := c.Keys(); !slices.Equal(keys, []string{"long"}) {
		t.Fatal(keys)
	}
	if st, err := c.Stats(); err != nil || st.Expirations != 1 {
		t.Fatalf("%+v, %v", st, err)
	}
	if info, err := c.Info("long"); err != nil || info.TTL != time.Hour || info.Age < 200*time.Millisecond {
		t.Fatalf("%+v, %v", info, err)
	}
}

// Goroutines share one handle and attach their own; run under -race too.
func TestCacheConcurrentGoroutines(t *testing.T) {
	c, name := newCache(t, 16<<20)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			h := c
			if g%2 == 1 {
				own, err := OpenCache(name, CacheOptions{})
				if err != nil {
					errs <- err
					return
				}
				defer own.Close()
				h = own
			}
			for i := 0; i < 200; i++ {
				data := make([]uint32, 64)
				for j := range data {
					data[j] = uint32(g*1_000_000 + i*100 + j)
				}
				key := fmt.Sprintf("g%d/k%d", g, i%20)
				if _, err := h.Put(key, Vector(data), 0, EncodeOptions{}); err != nil {
					errs <- err
					return
				}
				v, err := h.Get(key, DecodeOptions{})
				if err != nil {
					errs <- err
					return
				}
				got, _ := Values[uint32](v)
				same := slices.Equal(got, data)
				v.Close()
				if !same {
					errs <- fmt.Errorf("goroutine %d read back other data", g)
					return
				}
				if _, err := h.Put("shared", Vector(data), 0, EncodeOptions{}); err != nil {
					errs <- err
					return
				}
				if s, err := h.GetAliased("shared", DecodeOptions{}); err == nil {
					got, _ := Values[uint32](s.Tensor)
					for j := 1; j < len(got); j++ {
						if got[j] != got[j-1]+1 {
							errs <- fmt.Errorf("torn read of a shared key")
							break
						}
					}
					s.Close()
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Stats(); st.Entries != 81 || st.PinnedEntries != 0 || st.Clients != 1 {
		t.Fatalf("%+v", st)
	}
}

// Close on one goroutine while others are inside Put and Get: the handle is freed only after
// their calls return, and later calls fail (ErrInvalidArgument, "closed") instead of using freed memory.
func TestCacheCloseWhileInUse(t *testing.T) {
	for round := 0; round < 20; round++ {
		c, _ := newCache(t, 4<<20)
		data := make([]uint32, 1024)
		for j := range data {
			data[j] = uint32(j)
		}
		var wg, started sync.WaitGroup
		errs := make(chan error, 4)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			started.Add(1)
			go func() {
				defer wg.Done()
				started.Done()
				for {
					if _, err := c.Put("k", Vector(data), 0, EncodeOptions{}); err != nil {
						if !errors.Is(err, ErrInvalidArgument) {
							errs <- err
						}
						return
					}
					v, err := c.GetAliased("k", DecodeOptions{})
					if err != nil {
						if !errors.Is(err, ErrInvalidArgument) {
							errs <- err
						}
						return
					}
					got, _ := Values[uint32](v.Tensor)
					if got[1023] != 1023 {
						errs <- fmt.Errorf("torn value")
					}
					v.Close()
				}
			}()
		}
		started.Wait()
		time.Sleep(time.Millisecond)
		c.Close()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// Cache.Get is Go memory: no pin is left behind, and the data outlives the view's collection,
// Close of the Cache and the pool's unlinking (an alias of the pool faults by then).
func TestCacheGetCopies(t *testing.T) {
	c, name := newCache(t, 1<<20)
	want := rampF32(4096, 5)
	if _, err := c.Put("k", Vector(want), 0, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get("k", DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := got.Data
	if got.OwnsCMemory() {
		t.Fatal("Cache.Get must return Go memory")
	}
	if info, err := c.Info("k"); err != nil || info.Pins != 0 {
		t.Fatalf("Get left a pin: %+v, %v", info, err)
	}
	got = nil
	runtime.GC()
	runtime.GC()
	c.Close()
	if err := UnlinkCache(name); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if v := unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), len(want)); !slices.Equal(v, want) {
		t.Fatal("the copied bytes changed")
	}
}

// A forgotten CacheView is released by its cleanup; forgotten handles are closed too.
func TestCacheCleanupReleasesPins(t *testing.T) {
	c, _ := newCache(t, 1<<20)
	if _, err := c.Put("k", Vector([]uint8{1, 2, 3}), 0, EncodeOptions{}); err != nil {
		t.Fatal(err)
	}
	handles := liveHandles.Load()
	func() {
		v, err := c.GetAliased("k", DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = v
		extra, err := OpenCache(c.Name(), CacheOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = extra
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		info, err := c.Info("k")
		if err != nil {
			t.Fatal(err)
		}
		if info.Pins == 0 && liveHandles.Load() == handles {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pins %d, handles %d (want %d) after GC", info.Pins, liveHandles.Load(), handles)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, _ := c.Stats(); st.Clients != 1 {
		t.Fatalf("the forgotten handle is still attached: %+v", st)
	}
	// Unpinned, the entry goes at once.
	if err := c.Delete("k"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Get("k", DecodeOptions{})
	if e := wantStatus(t, "get after delete", err, ErrNotFound); e.Status.Name() != "TENSO_E_NOT_FOUND" {
		t.Fatalf("%#v", e)
	}
}
