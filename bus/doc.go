// Package bus is a messaging layer over RAET stacks: publish/subscribe with
// subject filters and replay, request/reply with deadlines and queue groups,
// and push/pull work queues. The same code runs over a road estate (Road), a
// lane yard (Lane), the in-memory MemNet of tests, or any other Transport.
//
//	s, _ := road.New(&road.Config{Name: "alpha", Listen: ":7530"})
//	s.Start()
//	node, _ := bus.New(bus.NewRoad(s), nil)
//	defer node.Close()
//	sub, _ := node.Subscribe("beta", []string{"orders.>"}, &bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplayLast, N: 10}})
//	for d := range sub.Messages() { ... }
//
// # Publish/subscribe
//
// Subjects are dot-separated tokens; filters take "*" (one token) and ">"
// (the rest), as NATS does (Match). A subscriber sends its filters to each
// publisher it subscribes to, and the publisher filters: a message that
// matches no filter of a subscriber never crosses the wire to it.
//
// Each publisher numbers its messages (Delivery.Seq, from 1). Each
// subscription is a stream whose items the publisher numbers too; the
// subscriber restores their order (the publisher keeps up to
// Config.SendWindow items in flight) and drops duplicates, so messages come
// once each and in order. What a subscription misses is reported in the
// stream, never silent: DeliveryDrops and Delivery.Drops (messages the
// publisher dropped for it, by subject), DeliveryGap (messages it asked for
// that are no longer retained, or of another history), DeliveryCut.
//
// The publisher holds at most the high-water mark (SubOptions.HWM, default
// Config.DefaultHWM, at most Config.MaxHWM) of messages for each
// subscription, and applies the subscription's policy when it is reached:
// Block (Publish waits, at most Config.BlockTimeout: then that subscription
// is cut off), DropNewest, DropOldest, or Cut (the slow subscriber is cut
// off). The publisher sets the limits: a subscription gets a policy of
// Config.Policies only (by default not Block). Every drop is counted on
// both sides (Node.Subscribers, Subscription.Stats).
//
// Each subscription is paced on its own: the subscriber acknowledges the
// items its application takes from Messages, and the publisher sends no
// more than SubOptions.Buffer items past the last acknowledged. A
// subscription the application does not read thus fills its own queue at
// the publisher, where its policy applies, and holds up none of its node's
// other subscriptions, requests or jobs.
//
// A publisher trusts no subscriber to be cooperative: its budgets per peer
// (Config.MaxPeerSubscriptions, MaxFilters, MaxFilterBytes, MaxPeerReplays,
// MaxReplay, MaxPeerQueued, MaxPeerSenders) bound what one peer's
// subscriptions hold, and a subscription over one is refused with
// ErrOverBudget.
//
// A subscription ends with its subscriber: Subscription.Close and
// Node.Close tell the publisher, and a subscriber that answers no heartbeat
// for Config.ReleaseSilent (killed, say) is released. Each end is a
// PeerReleased event at the publisher, with its reason.
//
// A publisher keeps a bounded history (Config.History: in memory by default,
// the last Config.HistoryLast messages per subject and none older than
// Config.HistoryAge; NewBoltHistory keeps it in a bbolt file across
// restarts). A subscription asks for new messages only, the last N, every
// message since a sequence number (Subscription.Position, or the Epoch and
// Seq of the last delivery processed, to resume after a restart with no gap
// and no duplicate) or since a time.
//
// # Request/reply
//
// Request sends a request and waits for the reply until the ctx deadline
// (Config.RequestTimeout without one); the pending request is forgotten when
// Request returns, so memory stays flat however many time out. Serve answers
// the requests of a subject filter with at most ServeOptions.Concurrency
// handlers at once. Services may form queue groups: RequestGroup sends to
// the least busy live member, and to another if that member goes down
// first. Node.RTT is the round-trip time to a peer.
//
// # Push/pull
//
// Pull gives a pusher credit for that many jobs at once; Push hands each
// job to the least loaded puller with credit. A job is acknowledged when
// the puller's handler returns; a puller that goes down, restarts or does
// not answer within Config.JobTimeout has its jobs handed to another; the
// pusher reports each job done exactly once (Results), and only from a
// puller it was handed to. A pusher trusts a puller with what it has shown
// it can do (Config.PullCreditStart, MaxPullCredit), and parks a job handed
// out Config.JobAttempts times (JobResult.Parked). With Config.JobFile the
// jobs not yet done are kept on disk: a pusher that crashes hands them out
// again when it starts. A responder holds at most Config.MaxPeerRequests
// requests and MaxPeerAnswers answers of one peer. docs/security.md lists the
// budgets against a hostile peer.
//
// # Peers
//
// A node learns peers from the transport's events and from what they send.
// It says hello to each (Config.Heartbeat): a hello carries the sender's run
// number, so a restart is seen, and the queue groups it serves. PeerEvents
// are the connection hooks: PeerUp (connected, or restarted), PeerDown
// (may come back: the stack's presence said so, or it stopped answering
// hellos) and PeerGone (will not), each with the reason. After a publisher
// restarts, its subscriptions come back by themselves; after a subscriber
// restarts, the publisher drops its old subscriptions.
//
// # Wire
//
// A pattern message is an ordinary RAET message whose body is an envelope
// (package bus/envelope, defined in spec/raet.yaml and described, with
// what a reference estate must send to take part, in docs/wire.md). raetdump
// and the Wireshark dissector show envelopes.
//
// # Goroutines
//
// New starts one goroutine for heartbeats and for reading a transport's
// channels (Road and Lane hand messages to the node from their own
// goroutine instead). A subscription has one goroutine that hands its
// deliveries to the application (so that Position counts only what was
// taken). A subscription served has up to SendWindow sending
// goroutines while it has items to send, none when idle; Serve and Pull run
// their handlers' goroutines; control envelopes are sent by a goroutine per
// peer while it has any. Close stops and joins them all.
package bus
