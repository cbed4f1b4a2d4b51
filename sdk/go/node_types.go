package tenso

import "time"

// NodeOptions configure a [Node]; the zero value is libtenso's defaults: a TLS 1.3 listener
// on 127.0.0.1 with an ephemeral key, accepting any dialer that proves a key.
type NodeOptions struct {
	// Listen addresses ("tls://127.0.0.1:0", "tcp://[::1]:0", "unix:///run/x.sock"); nil:
	// "tls://127.0.0.1:0". tcp:// and unix:// need AllowPlaintext.
	Listen         []string
	AllowPlaintext bool // allow tcp:// and unix:// listeners and peers (no TLS)
	NoFDPassing    bool // never pass descriptors over Unix sockets
	NoListen       bool // a node that only dials
	// No busy polling: a send waiting for its acknowledgement, or a request for its value,
	// sleeps at once instead of polling its socket for up to 100 µs first, and so does the
	// node's event loop between requests. Less CPU, more latency.
	NoBusyPoll bool
	// This node's identity (PEM); empty: an ephemeral P-256 key and self-signed certificate.
	CertPEM, KeyPEM string
	// Dialers the listener trusts: chains ending at CAPEM, or keys with these fingerprints
	// (64 hex each). Neither: any dialer that proves a key.
	CAPEM      string
	PinnedKeys []string
	Threads    uint32 // event-loop threads; 0 = 1
	// Limits on every input from the wire; zero = libtenso's defaults (see tenso/net.h).
	MaxPacketBytes    uint64
	MaxNameBytes      uint32
	MaxQueued         uint32
	MaxQueuedBytes    uint64
	MaxConnections    uint32
	MaxPoolPerPeer    uint32
	IdleTimeout       time.Duration // pooled connections idle this long are closed
	IOTimeout         time.Duration // deadline of calls whose context has none (not Receive)
	FDPassingMinBytes uint64
}

// Message is a received push: the name the sender gave it, the sender (its key fingerprint
// over TLS, else "tcp://host:port" or "unix:") and the value, which aliases C memory owned by
// the message until Tensor.Close (or garbage collection).
type Message struct {
	Name   string
	Sender string
	Tensor *Tensor
}

// NodeStats are a node's counters (tenso_node_stats).
type NodeStats struct {
	PoolSize           uint32 // outbound connections held in the pool (idle or busy)
	InboundConnections uint32
	Queued             uint32 // received pushes waiting
	QueuedBytes        uint64
	BytesSent          uint64
	BytesReceived      uint64
	ConnectionsOpened  uint64 // outbound dials (pool misses)
	ConnectionsReused  uint64 // outbound calls served by a pooled connection
	Refused            uint64 // inbound peers refused (auth, limits, hostile frames)
	TLSKernel          uint64 // TLS connections whose records the kernel encrypts (kTLS)
	TLSUser            uint64 // TLS connections whose records OpenSSL encrypts in this process
	BusyPolls          uint64 // waits for a peer's answer that polled for it first
	BusyPollHits       uint64 // those whose answer came while polling
}

// AccessOp is what a peer asks of a node's access hook (Node.SetAccess).
type AccessOp int

const (
	AccessGet  AccessOp = 1 // the peer pulls a published value (TENSO_NODE_ACCESS_GET)
	AccessPush AccessOp = 2 // the peer pushes a value (TENSO_NODE_ACCESS_PUSH)
)

// AccessFunc decides whether peer (its key fingerprint over TLS, else "tcp://host:port" or
// "unix:") may get or push name.
type AccessFunc func(op AccessOp, peer, name string) bool
