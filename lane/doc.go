// Package lane is RAET's lane: messaging between processes of one host
// over Unix datagram sockets (AF_UNIX, SOCK_DGRAM), wire-compatible with
// the lane of the Python reference (raet 0.6.9, raet/lane).
//
// A yard is one socket, <dir>/<lane>.<yard>.uxd, used both to send and to
// receive: a receiver learns a new yard from the address its first page
// came from, and answers there. There is no handshake, no encryption and no
// acknowledgement; the kernel delivers unix datagrams reliably and in order,
// and this package reports every failure to send instead of losing a
// message.
//
// # Pages
//
// A message (a "book") is a body mapping, serialized as compact JSON (pack
// kind 0, the default), msgpack (1), CBOR (2, a raet-go extension) or by a
// serializer plugin (its body kind's number, such as 5 for zstdjson), sent
// in one or more pages of at most 65535 bytes. A page is a text head with
// all nine fields, in this order, then a section of the body:
//
//	ri RAET
//	vn 0
//	pk 0                   pack kind
//	sn alpha               source yard
//	dn beta                destination yard
//	si 661752e96abf6110ed  session id: 18 hex, chosen by the sender per destination
//	bi 1                   book id: per destination, 1..0xffffffff then 1 again
//	pn 0000                page number
//	pc 0001                page count
//	                       (empty line)
//	{"subject":"lane hello","n":1}
//
// A body too large for one page is cut into sections of
// 65535 - (head length + 2) bytes. The receiver keeps a book per
// (dn, sn, si, bi) until its pages are all there; a book starts only with
// page 0. A new session id from a yard (it restarted) drops its unfinished
// books.
//
// # Use
//
//	st, err := lane.New(&lane.Config{Dir: "/run/myapp", Name: "worker1"})
//	if err != nil { ... }
//	if err := st.Start(); err != nil { ... } // binds /run/myapp/lane.worker1.uxd
//	defer st.Close()
//	err = st.Send(ctx, "manager", map[string]any{"cmd": "ping"})
//	for m := range st.Receive() {
//		fmt.Println(m.From, m.Body)
//	}
//
// # Plugins
//
// Like the road stack, a lane stack takes a serializer and a queue through
// its Config, built in or a plugin (package plugins/host runs plugins as
// subprocesses):
//
//	h, err := host.New(&host.Config{Dir: "/usr/lib/raet/plugins"})
//	ser, err := h.Serializer(ctx, "zstdjson") // pages carry pack kind 5
//	q, err := h.Queue(ctx, "bolt")            // a durable queue
//	st, err := lane.New(&lane.Config{Name: "worker1", Serializer: ser, Queue: q})
//
// Config.Serializer serializes what the stack sends; received bodies of a
// plugin's kind are decoded by it or by the serializer registered for that
// kind in Config.Serializers (a packet.Registry; the process-wide one by
// default), off the socket reader and in batches
// (packet.BatchSerializer), so a slow or hung plugin holds up neither the
// reading nor the order of messages. BodyKindOf and PackKindOf map the
// lane's pack kinds to the body kinds serializers have. Config.Queue
// keeps each message until it is sent; Start sends what a durable queue
// kept from an earlier run.
//
// # Safety and limits
//
// Start creates a missing socket directory with mode 0700 and makes the
// socket 0600 before using it. It removes a socket file left by a dead
// process only after a connect probe shows that nobody listens on it; a
// live socket is an error (ErrYardInUse) and is never taken over. Close
// removes the socket file if it is still ours.
//
// Unfinished books are bounded in number, bytes and time (Config.MaxBooks,
// MaxBookBytes, BookTimeout); messages in size (MaxMessageSize); remembered
// yards in number (MaxYards, the least recently used is forgotten). A page
// that is bad in any way is dropped and counted by reason (DropReason,
// Counters.Drops), never a panic; the Receive channel carries only whole,
// decoded mappings. A consumer that
// does not keep up with Receive makes senders wait: a full destination
// (EAGAIN, ENOBUFS) makes Send wait for room in a bounded retry queue until
// its context or Config.SendTimeout ends, then fail with ErrBusy. A
// destination whose socket vanished (ECONNREFUSED, ENOENT) fails with
// ErrYardGone and is forgotten.
//
// # Capture
//
// Config.Tap sees every page sent and received (TapPacket). Its fields are
// those of dissect.LanePacket, so a pcapng capture that raetdump reads is
// one conversion away:
//
//	pw, err := dissect.NewPcapngWriter(f, nil)
//	...
//	cfg.Tap = func(p lane.TapPacket) { pw.TapLane(dissect.LanePacket(p)) }
//
// raet lane serve --pcap FILE does this.
//
// # Compatibility notes
//
// Differences from the reference, all on input it would mishandle: it
// crashes on a page from an unnamed socket or from a yard whose address
// does not name it, we drop those (DropBadSource); it accepts any number of
// unfinished books forever, we bound them; a page of a known yard from
// another address is dropped. Like the reference, a page addressed to
// another yard name (dn) is still accepted; Counters.Misaddressed counts
// them.
package lane
