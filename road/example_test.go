package road_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/plugins/builtin"
	"github.com/raet-go/raet/road"
)

// A queue that holds a message from an earlier run (here put by hand; a
// durable queue plugin keeps them across a crash): the stack sends it once
// its remote is allowed, and WaitPending tells when it is done.
func ExampleStack_WaitPending() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	main, _ := road.New(&road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	main.Start()
	defer main.Close()

	q := builtin.NewMemQueue(0, 0)
	q.Put("main", codec.BodyKindJSON, []byte(`{"left":"over"}`))
	sender, _ := road.New(&road.Config{Name: "sender", Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1, Queue: q})
	sender.Start()
	defer sender.Close()
	if _, err := sender.Join(ctx, main.Addr().String()); err != nil {
		fmt.Println(err)
		return
	}
	done, failed, err := sender.WaitPending(ctx)
	fmt.Println("resent:", done, "failed:", failed, err)
	fmt.Println("main got:", (<-main.Receive()).Body)
	// Output:
	// resent: 1 failed: 0 <nil>
	// main got: map[left:over]
}

// Two estates on loopback: beta joins alpha, the main, sends it a message
// and gets an answer.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alpha, err := road.New(&road.Config{Name: "alpha", Main: true, Auto: keep.AutoOnce, Listen: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	alpha.Start()
	defer alpha.Close()
	beta, err := road.New(&road.Config{Name: "beta", Listen: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	beta.Start()
	defer beta.Close()

	main, err := beta.Join(ctx, alpha.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("beta joined", main.Name, "allowed:", main.Allowed)
	if err := beta.Send(ctx, main.Name, map[string]any{"q": "ping"}); err != nil {
		fmt.Println(err)
		return
	}
	m := <-alpha.Receive()
	fmt.Println(m.From, "sent", m.Body["q"])
	alpha.Send(ctx, m.From, map[string]any{"a": "pong"})
	fmt.Println((<-beta.Receive()).Body["a"])
	// Output:
	// beta joined alpha allowed: true
	// beta sent ping
	// pong
}

// A join the main cannot complete says why: here the main leaves new keys
// to an operator (AutoNever), and the joiner gives up waiting.
func ExampleJoinError() {
	alpha, _ := road.New(&road.Config{Name: "alpha", Main: true, Listen: "127.0.0.1:0"}) // Auto: never
	alpha.Start()
	defer alpha.Close()
	beta, _ := road.New(&road.Config{Name: "beta", Listen: "127.0.0.1:0"})
	beta.Start()
	defer beta.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := beta.Join(ctx, alpha.Addr().String())
	var je *road.JoinError
	if errors.As(err, &je) {
		fmt.Println(je.Reason)
		fmt.Println(je.Reason.Describe())
		fmt.Println(je.Hint)
	}
	// Output:
	// pending-theirs
	// our keys wait for the remote's operator
	// the remote's operator runs: raet keys accept --keep DIR beta
}

// Close writes what is queued, then stops; Done and Err tell when and why
// a stack stopped.
func ExampleStack_Done() {
	s, _ := road.New(&road.Config{Name: "alpha", Listen: "127.0.0.1:0"})
	s.Start()
	s.Close()
	<-s.Done()
	fmt.Println(s.Err())
	// Output:
	// raet: stack closed
}

// Two raet-go estates seal their session with an AEAD coat, with no foot;
// an estate with Config.AEAD = road.AEADRefuse keeps the NaCl coat and the
// MAC foot with everyone.
func ExampleAEADMode() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	main, _ := road.New(&road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	main.Start()
	defer main.Close()
	for _, mode := range []road.AEADMode{road.AEADPrefer, road.AEADRefuse} {
		s, _ := road.New(&road.Config{Name: fmt.Sprint("other", mode), Auto: keep.AutoAlways, Listen: "127.0.0.1:0",
			AlivePeriod: -1, AEAD: mode})
		s.Start()
		defer s.Close()
		r, err := s.Join(ctx, main.Addr().String())
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("AEAD:", r.CoatKind == codec.CoatKindAES256GCM || r.CoatKind == codec.CoatKindChaCha20Poly1305,
			"foot:", r.FootKind)
	}
	// Output:
	// AEAD: true foot: nada
	// AEAD: false foot: mac
}

// A main that holds at most one remote (MaxRemotes) forgets the longest
// silent one when another joins; its keep files stay, so it could come
// back. ForgetAfter forgets the same way a remote reaped and still silent,
// and AliveRate spaces the alives of a main with many remotes.
func ExampleConfig_maxRemotes() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	main, _ := road.New(&road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0",
		MaxRemotes: 1, ForgetAfter: 24 * time.Hour, AliveRate: 100})
	main.Start()
	defer main.Close()
	for _, name := range []string{"first", "second"} {
		s, _ := road.New(&road.Config{Name: name, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
		s.Start()
		defer s.Close()
		if _, err := s.Join(ctx, main.Addr().String()); err != nil {
			fmt.Println(err)
			return
		}
	}
	for {
		select {
		case ev := <-main.Events():
			if ev.Kind == road.EventForgotten {
				fmt.Println(ev.Remote, ev.Kind, ev.Reason)
				return
			}
		case <-ctx.Done():
			fmt.Println("nothing forgotten")
			return
		}
	}
	// Output: first forgotten too-many-remotes
}

// A main for a fleet of new estates: its keep on disk is written behind
// the protocol (what accepts a join goes out once the join's files are
// durable), at most KeepQueue writes wait before joins are answered
// keep-busy, and new estates join as fast as StrangerJoins joins under
// way and StrangerJoinRate a second allow.
func ExampleConfig_strangerJoins() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir, _ := os.MkdirTemp("", "fleet-main")
	defer os.RemoveAll(dir)
	main, err := road.New(&road.Config{Name: "main", Main: true, KeepDir: dir, Auto: keep.AutoAlways, Listen: "127.0.0.1:0",
		KeepQueue: 4096, StrangerJoins: 1024, StrangerJoinRate: 2000})
	if err != nil {
		fmt.Println(err)
		return
	}
	main.Start()
	defer main.Close()
	s, _ := road.New(&road.Config{Name: "minion", Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	s.Start()
	defer s.Close()
	if _, err := s.Join(ctx, main.Addr().String()); err != nil {
		fmt.Println(err)
		return
	}
	k, _ := keep.OpenReadOnly(dir)
	e, err := k.LoadRemote("minion")
	fmt.Println("kept when joined:", e.Name, *e.Joined, err)
	// Output: kept when joined: minion true <nil>
}

// Minions of the reference profile cannot learn their main's presence
// period: their operator sets it, here to what a main of default
// presence (AliveRate 200) takes with 10000 remotes, so that it answers
// about 200 alives a second, not 10000.
func ExamplePresencePeriod() {
	period := road.PresencePeriod(nil, 10000)
	minion := road.Config{Name: "minion1", Profile: road.ProfileReference, AlivePeriod: period}
	fmt.Println(minion.AlivePeriod, road.PresencePeriod(nil, 100))
	// Output: 50s 1s
}

// One goroutine keeps a hundred messages in flight with Go, and collects
// their outcomes from one channel, without a goroutine per message.
func ExampleStack_Go() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	main, _ := road.New(&road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	main.Start()
	defer main.Close()
	sender, _ := road.New(&road.Config{Name: "sender", Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	sender.Start()
	defer sender.Close()
	if _, err := sender.Join(ctx, main.Addr().String()); err != nil {
		fmt.Println(err)
		return
	}
	go func() { // the receiver
		for range 100 {
			<-main.Receive()
		}
	}()

	const n = 100
	done := make(chan *road.Call, n) // room for every outcome: none waits
	for i := range n {
		if _, err := sender.Go(ctx, "main", map[string]any{"n": i}, done); err != nil {
			fmt.Println("not sent:", err) // not queued: no outcome will come
			return
		}
	}
	ok := 0
	for range n {
		if c := <-done; c.Err == nil {
			ok++
		} else {
			fmt.Println(c.Body, c.Err)
		}
	}
	fmt.Println("done:", ok)
	// Output:
	// done: 100
}

// A body of bytes ([]byte or string) is sent as it is, with body kind raw:
// no encoding nor decoding. The receiver gets it in Raw, with Body nil,
// whatever its own Config.BodyKind; a mapping still goes as a mapping.
func ExampleStack_Send_raw() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	main, _ := road.New(&road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1, BodyKind: codec.BodyKindMsgpack})
	main.Start()
	defer main.Close()
	sender, _ := road.New(&road.Config{Name: "sender", Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	sender.Start()
	defer sender.Close()
	if _, err := sender.Join(ctx, main.Addr().String()); err != nil {
		fmt.Println(err)
		return
	}
	if err := sender.Send(ctx, "main", []byte{0xca, 0xfe, 0x00, 0x01}); err != nil {
		fmt.Println(err)
		return
	}
	m := <-main.Receive()
	fmt.Printf("%v % x %v\n", m.Kind, m.Raw, m.Body == nil)
	err := sender.Send(ctx, "main", 42)
	fmt.Println(errors.Is(err, road.ErrNotMapping))
	// Output:
	// raw ca fe 00 01 true
	// true
}
