//go:build cgo

package tenso

/*
#include "tgo.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"time"
	"unsafe"
)

// Shm is one packet in one named POSIX shared-memory segment (/dev/shm/<name> on Linux), the
// layout of the upstream Python TensoShm: the packet starts at byte 0 and the segment may be
// larger. "weights" and "/weights" name the same segment.
//
// Get and Bytes copy into Go memory; GetAliased and BytesAliased are the zero-copy forms
// (a Tensor from GetAliased keeps the mapping alive after the Shm is closed, until the
// Tensor is closed). A segment has no pinning: a reader
// sees whatever a writer puts there later. Use a [Cache] when readers and writers run
// concurrently. Methods may be called from several goroutines; Close waits for calls in flight.
type Shm struct {
	h        *handle
	writable bool
}

func freeShm(p unsafe.Pointer) { C.tenso_shm_close((*C.tenso_shm)(p)) }

func shmFrom(r C.tgo_shm_res, writable bool, op string) (*Shm, error) {
	if err := fail(r.res, op); err != nil {
		return nil, err
	}
	return &Shm{h: newHandle(unsafe.Pointer(r.shm), freeShm), writable: writable}, nil
}

func shmFlags(replace bool) C.uint32_t {
	if replace {
		return C.TENSO_SHM_REPLACE
	}
	return 0
}

// CreateShm creates a zero-filled segment of size bytes (at least 1) and maps it read-write.
// The error wraps ErrExists when the name is taken (unless replace: then a leftover segment
// of that name is unlinked first), ErrInvalidArgument for a bad name or size 0.
func CreateShm(name string, size uint64, replace bool) (*Shm, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cn, keep, err := cpath(name, "CreateShm")
	if err != nil {
		return nil, err
	}
	r := C.tgo_shm_create(cn, C.uint64_t(size), shmFlags(replace))
	runtime.KeepAlive(keep)
	return shmFrom(r, true, "CreateShm")
}

// CreateShmFor creates a segment sized exactly for t with the default options and encodes t
// into it; see EncodeOptions.CreateShm.
func CreateShmFor(name string, t *Tensor, replace bool) (*Shm, uint64, error) {
	return EncodeOptions{}.CreateShm(name, t, replace)
}

// CreateShm creates a segment sized exactly for t under these options (an upper bound when
// compressing) and encodes t into it: one copy of each body, straight into shared memory.
// It returns the segment and the packet length.
func (o EncodeOptions) CreateShm(name string, t *Tensor, replace bool) (*Shm, uint64, error) {
	const op = "CreateShmFor"
	if err := precheck(t, op); err != nil {
		return nil, 0, err
	}
	cn, keep, err := cpath(name, op)
	if err != nil {
		return nil, 0, err
	}
	var b builder
	defer b.release()
	v, err := b.build(o, t, op)
	if err != nil {
		return nil, 0, err
	}
	r := C.tgo_shm_create_for(cn, v, b.opts, shmFlags(replace))
	runtime.KeepAlive(keep)
	s, err := shmFrom(r, true, op)
	if err != nil {
		return nil, 0, err
	}
	return s, uint64(r.res.n), nil
}

// OpenShm opens an existing segment owned by this process's effective uid, read-write when
// writable (needed by Put): OpenShmWith(name, ShmOpenOptions{Writable: writable}).
func OpenShm(name string, writable bool) (*Shm, error) {
	return OpenShmWith(name, ShmOpenOptions{Writable: writable})
}

// OpenShmWith opens an existing segment. The error wraps ErrNotFound when there is no segment
// of that name, ErrIO when another uid owns it (unless o.AnyOwner). A segment truncated by
// another process gives ErrTruncated from then on; views of it read zeros where the lost pages
// were instead of raising SIGBUS (libtenso's SIGBUS handler, chained to the Go runtime's; see
// "Truncation" in tenso/shm.h for its limits).
func OpenShmWith(name string, o ShmOpenOptions) (*Shm, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cn, keep, err := cpath(name, "OpenShm")
	if err != nil {
		return nil, err
	}
	flags := C.uint32_t(0)
	if o.Writable {
		flags |= C.TENSO_SHM_WRITABLE
	}
	if o.AnyOwner {
		flags |= C.TENSO_SHM_ANY_OWNER
	}
	r := C.tgo_shm_open(cn, flags)
	runtime.KeepAlive(keep)
	return shmFrom(r, o.Writable, "OpenShm")
}

// UnlinkShm removes a segment's name; mappings stay valid until closed. The error wraps
// ErrNotFound when there is no such segment.
func UnlinkShm(name string) error {
	if versionErr != nil {
		return versionErr
	}
	cn, keep, err := cpath(name, "UnlinkShm")
	if err != nil {
		return err
	}
	r := C.tgo_shm_unlink(cn)
	runtime.KeepAlive(keep)
	return fail(r, "UnlinkShm")
}

func (s *Shm) ptr(op string) (*C.tenso_shm, error) {
	if s == nil {
		return nil, errClosed(op, "the segment")
	}
	// Held until the caller's deferred release: Close waits for it.
	p := s.h.acquire()
	if p == nil {
		return nil, errClosed(op, "the segment")
	}
	return (*C.tenso_shm)(p), nil
}

// Put encodes t at the start of the segment under o and returns the packet length. When the
// packet does not fit the error wraps ErrBufferTooSmall, n is the size needed and the segment
// is unchanged; a segment opened read-only gives ErrInvalidArgument.
func (s *Shm) Put(t *Tensor, o EncodeOptions) (n uint64, err error) {
	if err := precheck(t, "Shm.Put"); err != nil {
		return 0, err
	}
	p, err := s.ptr("Shm.Put")
	if err != nil {
		return 0, err
	}
	defer s.h.release()
	defer runtime.KeepAlive(s)
	var b builder
	defer b.release()
	v, err := b.build(o, t, "Shm.Put")
	if err != nil {
		return 0, err
	}
	r := C.tgo_shm_put(p, v, b.opts)
	return uint64(r.n), fail(r, "Shm.Put")
}

// Get decodes the packet at the start of the segment into Go memory (a copy of its bodies,
// safe to keep after the segment is closed or rewritten). The error wraps ErrTruncated when
// the segment holds no whole packet. GetAliased is the zero-copy form.
func (s *Shm) Get(o DecodeOptions) (*Tensor, error) { return s.get(o, false, "Shm.Get") }

// GetAliased decodes the packet at the start of the segment without copying: the Tensor
// aliases the mapping (except for LZ4 bodies, decompressed into C memory it owns). Close it
// when done; no slice of it may be used after that, nor after the Tensor becomes unreachable
// (keep it reachable with runtime.KeepAlive). Another process may rewrite the segment under it.
func (s *Shm) GetAliased(o DecodeOptions) (*Tensor, error) { return s.get(o, true, "Shm.GetAliased") }

func (s *Shm) get(o DecodeOptions, alias bool, op string) (*Tensor, error) {
	p, err := s.ptr(op)
	if err != nil {
		return nil, err
	}
	defer s.h.release()
	defer runtime.KeepAlive(s)
	info := C.tgo_shm_get(p, o.c())
	if err := fail(info.res, op); err != nil {
		return nil, err
	}
	return viewTree(&info, alias)
}

// Bytes is a copy of the whole segment in Go memory (nil once closed): safe to keep after
// Close and after the Shm is garbage-collected. BytesAliased is the zero-copy form.
func (s *Shm) Bytes() []byte {
	var out []byte
	s.segment("Shm.Bytes", func(seg []byte) { out = slices.Clone(seg) })
	return out
}

// BytesAliased is the whole segment without a copy: the slice points into the mapping (nil
// once closed), and it does not keep the Shm alive. It is valid only until Close, and only
// while the Shm is reachable: the cleanup of an unreachable Shm unmaps it, so keep it
// reachable with runtime.KeepAlive(s) after the last use of the slice. Another process may
// write the segment meanwhile. Writing through it needs a writable segment (the process would
// fault on a read-only mapping).
func (s *Shm) BytesAliased() []byte {
	var out []byte
	s.segment("Shm.BytesAliased", func(seg []byte) { out = seg })
	return out
}

// segment calls fn with the mapping while the handle is held (not at all once closed).
func (s *Shm) segment(op string, fn func(seg []byte)) {
	p, err := s.ptr(op)
	if err != nil {
		return
	}
	defer s.h.release()
	defer runtime.KeepAlive(s)
	n := uint64(C.tenso_shm_size(p))
	d := C.tenso_shm_data(p)
	if d == nil || n == 0 {
		return
	}
	fn(unsafe.Slice((*byte)(d), int(n)))
}

// Size is the segment's size in bytes (0 once closed).
func (s *Shm) Size() uint64 {
	p, err := s.ptr("Shm.Size")
	if err != nil {
		return 0
	}
	defer s.h.release()
	defer runtime.KeepAlive(s)
	return uint64(C.tenso_shm_size(p))
}

// Name is the name as given to create or open ("" once closed).
func (s *Shm) Name() string {
	p, err := s.ptr("Shm.Name")
	if err != nil {
		return ""
	}
	defer s.h.release()
	defer runtime.KeepAlive(s)
	return C.GoString(C.tenso_shm_name(p))
}

// Writable reports whether the mapping is writable.
func (s *Shm) Writable() bool { return s.writable }

// Close releases the handle (the segment stays until unlinked; Tensors from Get keep the
// mapping until they are closed). Idempotent; returns nil.
func (s *Shm) Close() error {
	if s != nil {
		s.h.close()
	}
	return nil
}

// Cache is a tensor cache in shared memory: string keys (1 to 128 bytes of UTF-8) to packets,
// shared by every process on the host that opens the same name, with LRU eviction, time to
// live, reads into Go memory (Get) and zero-copy reads (GetAliased) that pin their entry until
// the [CacheView] is closed. A process
// that dies holding the pool's lock does not wedge the others: the next one rebuilds the
// pool's tables. Methods may be called from several goroutines at once; Close waits for calls
// in flight.
type Cache struct {
	h *handle
}

// CacheView is a cache entry read in place ([Cache.GetAliased]): a Tensor whose memory is the
// pool. While it is
// open the entry is pinned: never evicted, expired, overwritten or reused (a Delete or a new
// Put of the key only hides it). Close releases the pin; a cleanup releases it if Close is
// forgotten (late: close views promptly, pinned space cannot be reused). A CacheView stays
// valid after the Cache is closed.
type CacheView struct {
	*Tensor
}

func freeCache(p unsafe.Pointer) { C.tenso_cache_close((*C.tenso_cache)(p)) }

func (o CacheOptions) c() C.tenso_cache_options {
	var c C.tenso_cache_options
	c.version = C.TENSO_CACHE_OPTIONS_VERSION
	if o.Replace {
		c.flags |= C.TENSO_SHM_REPLACE
	}
	if o.AnyOwner {
		c.flags |= C.TENSO_SHM_ANY_OWNER
	}
	c.size = C.uint64_t(o.Size)
	c.max_entries = C.uint32_t(o.MaxEntries)
	c.max_clients = C.uint32_t(o.MaxClients)
	c.max_pins = C.uint32_t(o.MaxPins)
	if o.LockTimeout > 0 {
		ms := (o.LockTimeout + time.Millisecond - 1) / time.Millisecond
		c.lock_timeout_ms = C.uint32_t(min(int64(ms), int64(^uint32(0))))
	}
	return c
}

func cacheFrom(r C.tgo_cache_res, op string) (*Cache, error) {
	if err := fail(r.res, op); err != nil {
		return nil, err
	}
	return &Cache{h: newHandle(unsafe.Pointer(r.cache), freeCache)}, nil
}

// CreateCache creates a pool named name and attaches to it. The error wraps ErrExists when
// the name is taken (unless o.Replace), ErrInvalidArgument when the size cannot hold the
// tables and one packet.
func CreateCache(name string, o CacheOptions) (*Cache, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cn, keep, err := cpath(name, "CreateCache")
	if err != nil {
		return nil, err
	}
	r := C.tgo_cache_create(cn, o.c())
	runtime.KeepAlive(keep)
	return cacheFrom(r, "CreateCache")
}

// OpenCache attaches to an existing pool (only o.LockTimeout and o.AnyOwner apply). The error
// wraps ErrNotFound when there is none, ErrIO when another uid owns it (unless o.AnyOwner),
// ErrCorrupt for a segment that is not a tenso cache, ErrFull when the pool's MaxClients
// handles are attached. A pool truncated by another process gives ErrTruncated from then on;
// a CacheView read or closed after it reads zeros where the lost pages were instead of raising
// SIGBUS (see "Truncation" in tenso/shm.h for the limits).
func OpenCache(name string, o CacheOptions) (*Cache, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cn, keep, err := cpath(name, "OpenCache")
	if err != nil {
		return nil, err
	}
	r := C.tgo_cache_open(cn, o.c())
	runtime.KeepAlive(keep)
	return cacheFrom(r, "OpenCache")
}

// UnlinkCache removes a pool's name; attached handles keep working. ErrNotFound when absent.
func UnlinkCache(name string) error {
	if versionErr != nil {
		return versionErr
	}
	cn, keep, err := cpath(name, "UnlinkCache")
	if err != nil {
		return err
	}
	r := C.tgo_cache_unlink(cn)
	runtime.KeepAlive(keep)
	return fail(r, "UnlinkCache")
}

func (c *Cache) ptr(op string) (*C.tenso_cache, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	if c == nil {
		return nil, errClosed(op, "the cache")
	}
	// Held until the caller's deferred release: Close waits for it.
	p := c.h.acquire()
	if p == nil {
		return nil, errClosed(op, "the cache")
	}
	return (*C.tenso_cache)(p), nil
}

// ckey is a key as (pointer, length) for one call: C copies or compares the bytes and keeps
// no pointer to them.
func ckey(key string) (*C.char, C.size_t) {
	if len(key) == 0 {
		return nil, 0
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(key))), C.size_t(len(key))
}

// Name is the pool's name ("" once closed).
func (c *Cache) Name() string {
	p, err := c.ptr("Cache.Name")
	if err != nil {
		return ""
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	return C.GoString(C.tenso_cache_name(p))
}

// Put stores t under key, encoded straight into the pool under o, and returns the packet
// length. ttl > 0: the entry expires that long after this put; 0: never. The error wraps
// ErrFull when no room is left after dropping expired and evicting unpinned entries,
// ErrTimeout when the lock was not obtained in time, ErrInvalidArgument for a bad key or a
// negative ttl.
func (c *Cache) Put(key string, t *Tensor, ttl time.Duration, o EncodeOptions) (uint64, error) {
	if err := precheck(t, "Cache.Put"); err != nil {
		return 0, err
	}
	p, err := c.ptr("Cache.Put")
	if err != nil {
		return 0, err
	}
	defer c.h.release()
	if ttl < 0 {
		return 0, &Error{Status: ErrInvalidArgument, Op: "Cache.Put", Message: fmt.Sprintf("negative ttl %v", ttl)}
	}
	defer runtime.KeepAlive(c)
	var b builder
	defer b.release()
	v, err := b.build(o, t, "Cache.Put")
	if err != nil {
		return 0, err
	}
	k, kn := ckey(key)
	r := C.tgo_cache_put(p, k, kn, v, b.opts, C.double(ttl.Seconds()))
	runtime.KeepAlive(key)
	return uint64(r.n), fail(r, "Cache.Put")
}

// Get returns the entry under key in Go memory (its bodies copied out of the pool; the entry
// is pinned only while copying): safe to keep after the Cache is closed, and Close does
// nothing. The error wraps ErrNotFound when the key is absent or expired. Counts a hit (and
// marks the entry most recently used) or a miss. GetAliased is the zero-copy form.
func (c *Cache) Get(key string, o DecodeOptions) (*Tensor, error) {
	var t *Tensor
	err := c.get(key, o, "Cache.Get", func(info *C.tgo_info) (err error) {
		t, err = viewTree(info, false)
		return err
	})
	return t, err
}

// GetAliased is Get without the copy: a [CacheView] whose Data points into the pool, its
// entry pinned until the view is closed. Close it when done; no slice of it may be used after
// that, nor after the view becomes unreachable - slices do not keep it alive (keep it
// reachable with runtime.KeepAlive). The view stays valid after the Cache is closed.
func (c *Cache) GetAliased(key string, o DecodeOptions) (*CacheView, error) {
	var v *CacheView
	err := c.get(key, o, "Cache.GetAliased", func(info *C.tgo_info) error {
		t, err := ownedTree(info)
		if err == nil {
			v = &CacheView{Tensor: t}
		}
		return err
	})
	return v, err
}

// get looks key up and hands the pinned view to wrap, which owns it from then on.
func (c *Cache) get(key string, o DecodeOptions, op string, wrap func(*C.tgo_info) error) error {
	p, err := c.ptr(op)
	if err != nil {
		return err
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	k, kn := ckey(key)
	info := C.tgo_cache_get(p, k, kn, o.c())
	runtime.KeepAlive(key)
	if err := fail(info.res, op); err != nil {
		return err
	}
	return wrap(&info)
}

// Delete removes key (a pinned entry is hidden at once and released with its last pin). The
// error wraps ErrNotFound when it is absent or expired.
func (c *Cache) Delete(key string) error {
	p, err := c.ptr("Cache.Delete")
	if err != nil {
		return err
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	k, kn := ckey(key)
	r := C.tgo_cache_delete(p, k, kn)
	runtime.KeepAlive(key)
	return fail(r, "Cache.Delete")
}

// Info is what the cache knows about key without decoding it (neither a hit nor a miss). The
// error wraps ErrNotFound when it is absent or expired.
func (c *Cache) Info(key string) (CacheEntryInfo, error) {
	p, err := c.ptr("Cache.Info")
	if err != nil {
		return CacheEntryInfo{}, err
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	k, kn := ckey(key)
	r := C.tgo_cache_info(p, k, kn)
	runtime.KeepAlive(key)
	if err := fail(r.res, "Cache.Info"); err != nil {
		return CacheEntryInfo{}, err
	}
	return CacheEntryInfo{
		Packet:     packetInfoFrom(&r.info.packet),
		AllocBytes: uint64(r.info.alloc_bytes),
		TTL:        time.Duration(float64(r.info.ttl_seconds) * float64(time.Second)),
		Age:        time.Duration(float64(r.info.age_seconds) * float64(time.Second)),
		Pins:       uint32(r.info.pins),
	}, nil
}

// Contains reports whether key is present and not expired.
func (c *Cache) Contains(key string) (bool, error) {
	p, err := c.ptr("Cache.Contains")
	if err != nil {
		return false, err
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	k, kn := ckey(key)
	r := C.tgo_cache_contains(p, k, kn)
	runtime.KeepAlive(key)
	return r.n != 0, fail(r, "Cache.Contains")
}

// Keys returns every live key, most recently used first.
func (c *Cache) Keys() ([]string, error) {
	p, err := c.ptr("Cache.Keys")
	if err != nil {
		return nil, err
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	r := C.tgo_cache_keys(p)
	if err := fail(r.res, "Cache.Keys"); err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(r.buf))
	buf := unsafe.Slice((*byte)(unsafe.Pointer(r.buf)), int(r.len))
	keys := make([]string, 0, int(r.count))
	for len(buf) >= 4 {
		n := int(binary.NativeEndian.Uint32(buf))
		if n > len(buf)-4 {
			break // cannot happen: the C side writes whole records
		}
		keys = append(keys, string(buf[4:4+n]))
		buf = buf[4+n:]
	}
	return keys, nil
}

// Clear removes every entry (pinned ones are hidden and released with their pins).
func (c *Cache) Clear() error {
	p, err := c.ptr("Cache.Clear")
	if err != nil {
		return err
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	return fail(C.tgo_cache_clear(p), "Cache.Clear")
}

// Stats returns the pool's counters and occupancy.
func (c *Cache) Stats() (CacheStats, error) {
	p, err := c.ptr("Cache.Stats")
	if err != nil {
		return CacheStats{}, err
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	r := C.tgo_cache_stats(p)
	if err := fail(r.res, "Cache.Stats"); err != nil {
		return CacheStats{}, err
	}
	s := &r.stats
	return CacheStats{
		Entries: uint64(s.entries), MaxEntries: uint64(s.max_entries), PoolBytes: uint64(s.pool_bytes),
		DataBytes: uint64(s.data_bytes), UsedBytes: uint64(s.used_bytes), FreeBytes: uint64(s.free_bytes),
		Hits: uint64(s.hits), Misses: uint64(s.misses), Evictions: uint64(s.evictions),
		Expirations: uint64(s.expirations), PinnedEntries: uint64(s.pinned_entries),
		Recoveries: uint64(s.recoveries), Clients: uint64(s.clients),
	}, nil
}

// Check verifies every invariant of the pool (O(entries); for tests and tooling). The error
// wraps ErrCorrupt, with the first broken invariant in its message.
func (c *Cache) Check() error {
	p, err := c.ptr("Cache.Check")
	if err != nil {
		return err
	}
	defer c.h.release()
	defer runtime.KeepAlive(c)
	return fail(C.tgo_cache_check(p), "Cache.Check")
}

// Close detaches (CacheViews stay valid and pinned until closed). Idempotent; returns nil.
func (c *Cache) Close() error {
	if c != nil {
		c.h.close()
	}
	return nil
}
