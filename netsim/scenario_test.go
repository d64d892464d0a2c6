package netsim_test

import (
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/netsim"
)

var (
	simA = netip.MustParseAddrPort("10.0.0.1:7530")
	simB = netip.MustParseAddrPort("10.0.0.2:7530")
)

// arrival is one datagram as b received it: its sequence number and when.
type arrival struct {
	seq uint32
	at  time.Duration // since the first send
}

// flow sends n datagrams of size bytes from a to b, one every gap, over a
// Network with seed impaired by sc, in a synctest bubble (fake time), and
// returns what b received, in order, and the link's counts.
func flow(t *testing.T, seed uint64, sc *netsim.Scenario, n, size int, gap time.Duration) ([]arrival, netsim.LinkStats) {
	t.Helper()
	var got []arrival
	var stats netsim.LinkStats
	synctest.Test(t, func(t *testing.T) {
		network := netsim.NewNetwork(seed)
		defer network.Close()
		a, err := network.Listen(simA, netsim.Impairment{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := network.Listen(simB, netsim.Impairment{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Apply(network, simA, simB); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, 65536)
			for {
				m, _, err := b.ReadFrom(buf)
				if err != nil {
					if !errors.Is(err, net.ErrClosed) {
						t.Error(err)
					}
					return
				}
				if m != size {
					t.Errorf("received %d bytes, sent %d", m, size)
				}
				got = append(got, arrival{binary.BigEndian.Uint32(buf), time.Since(start)})
			}
		}()
		msg := make([]byte, size)
		to := net.UDPAddrFromAddrPort(simB)
		for i := range n {
			binary.BigEndian.PutUint32(msg, uint32(i))
			if _, err := a.WriteTo(msg, to); err != nil {
				t.Fatal(err)
			}
			time.Sleep(gap)
		}
		time.Sleep(10 * time.Second) // everything delayed lands
		stats = network.LinkStats(simA, simB)
		_ = b.Close()
		<-done
	})
	return got, stats
}

func parse(t *testing.T, text string) *netsim.Scenario {
	t.Helper()
	sc, err := netsim.ParseScenario([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// A seed replays a run exactly: the same datagrams arrive in the same
// order at the same (fake) times, with every impairment at work; another
// seed gives another run.
func TestSeedReplaysRun(t *testing.T) {
	sc := parse(t, `
link:
  delay: 20ms
  jitter: 5ms
  loss: 2%
  duplicate: 1%
  reorder: 1%
  rate: 2Mbit
  queue: 20
  bursts: {good_to_bad: 0.01, bad_to_good: 0.3, bad_loss: 0.5}
`)
	const n = 3000
	first, s1 := flow(t, 7, sc, n, 200, 500*time.Microsecond)
	again, s2 := flow(t, 7, sc, n, 200, 500*time.Microsecond)
	other, _ := flow(t, 8, sc, n, 200, 500*time.Microsecond)
	if !slices.Equal(first, again) || s1 != s2 {
		t.Fatalf("seed 7 twice: runs differ (%d and %d arrivals; %+v and %+v)", len(first), len(again), s1, s2)
	}
	if slices.Equal(first, other) {
		t.Fatal("seeds 7 and 8 gave the same run")
	}
	if s1.Dropped == 0 || s1.BurstDropped == 0 || s1.Duplicated == 0 || s1.Reordered == 0 || s1.ShaperDrops == 0 {
		t.Fatalf("not every impairment was at work: %+v", s1)
	}
	if s1.Received-s1.Dropped+s1.Duplicated != s1.Forwarded+s1.Undelivered+s1.QueueDrops+s1.ShaperDrops {
		t.Fatalf("counts do not add up: %+v", s1)
	}
}

// relErr is |got-want|/want.
func relErr(got, want float64) float64 { return math.Abs(got-want) / want }

// The configured delay, jitter and loss are met within 5% over 20k
// datagrams, and the link keeps its order.
func TestScenarioDelayJitterLossMet(t *testing.T) {
	sc := parse(t, "seed: 3\nlink: {delay: 25ms, jitter: 5ms, loss: 1%, limit: 10000}\n")
	const n = 20000
	gap := 10 * time.Millisecond // over twice the jitter: order costs no delay
	got, st := flow(t, 1, sc, n, 100, gap)
	var sum, sq float64
	for i, a := range got {
		d := float64(a.at - time.Duration(a.seq)*gap)
		sum += d
		sq += d * d
		if i > 0 && a.seq <= got[i-1].seq {
			t.Fatalf("datagram %d arrived after %d: out of order", a.seq, got[i-1].seq)
		}
	}
	m := float64(len(got))
	mean := sum / m
	sd := math.Sqrt(sq/m - mean*mean)
	wantSD := float64(5*time.Millisecond) / math.Sqrt(3) // uniform within ±5ms
	loss := 1 - m/n
	t.Logf("delay %v (25ms), jitter sd %v (%v), loss %.4f (0.01), %+v", time.Duration(mean), time.Duration(sd), time.Duration(wantSD), loss, st)
	if e := relErr(mean, float64(25*time.Millisecond)); e > 0.05 {
		t.Errorf("mean delay %v is %.1f%% off 25ms", time.Duration(mean), 100*e)
	}
	if e := relErr(sd, wantSD); e > 0.05 {
		t.Errorf("jitter sd %v is %.1f%% off %v", time.Duration(sd), 100*e, time.Duration(wantSD))
	}
	if e := relErr(loss, 0.01); e > 0.05 {
		t.Errorf("loss %.4f is %.1f%% off 0.01", loss, 100*e)
	}
}

// A rate-limited link carries its configured rate within 5% when offered
// more, drops the excess at the tail of its queue, and the queue bounds the
// delay.
func TestScenarioRateMet(t *testing.T) {
	sc := parse(t, "link: {delay: 25ms, rate: 10Mbit, queue: 50, limit: 10000}\n")
	const n, size = 15000, 1000
	gap := 666 * time.Microsecond // 12 Mbit/s offered
	got, st := flow(t, 1, sc, n, size, gap)
	if len(got) < 10000 {
		t.Fatalf("only %d datagrams arrived", len(got))
	}
	span := got[len(got)-1].at - got[0].at
	rate := float64(len(got)-1) * size * 8 / span.Seconds()
	t.Logf("rate %.0f bit/s (10 Mbit/s), %+v", rate, st)
	if e := relErr(rate, 10e6); e > 0.05 {
		t.Errorf("rate %.0f bit/s is %.1f%% off 10 Mbit/s", rate, 100*e)
	}
	if st.ShaperDrops == 0 {
		t.Error("offered 12 Mbit/s to 10 Mbit/s and nothing was dropped at the queue")
	}
	// A datagram waits at most for the 50 ahead of it and its own sending.
	maxDelay := 25*time.Millisecond + 51*size*8*time.Second/10e6
	for _, a := range got {
		if d := a.at - time.Duration(a.seq)*gap; d > maxDelay+time.Millisecond {
			t.Fatalf("datagram %d took %v, over the queue's bound %v", a.seq, d, maxDelay)
		}
	}
}

// Loss in bursts meets the Gilbert-Elliott channel's mean loss and mean
// burst length within 5% over 400k datagrams.
func TestScenarioBurstLossMet(t *testing.T) {
	sc := parse(t, "seed: 5\nlink: {bursts: {good_to_bad: 0.01, bad_to_good: 0.25, bad_loss: 1}}\n")
	const n = 400000
	got, _ := flow(t, 1, sc, n, 8, time.Microsecond)
	lost, bursts := 0, 0
	next := uint32(0)
	for _, a := range got {
		if a.seq > next {
			lost += int(a.seq - next)
			bursts++
		}
		next = a.seq + 1
	}
	lost += int(n - next)
	loss := float64(lost) / n
	meanBurst := float64(lost) / float64(bursts)
	want := sc.AToB.Bursts.MeanLoss()
	t.Logf("loss %.5f (%.5f), mean burst %.2f (4)", loss, want, meanBurst)
	if e := relErr(loss, want); e > 0.05 {
		t.Errorf("burst loss %.5f is %.1f%% off %.5f", loss, 100*e, want)
	}
	if e := relErr(meanBurst, 4); e > 0.05 {
		t.Errorf("mean burst %.2f is %.1f%% off 4", meanBurst, 100*e)
	}
}

// A link's impairment changes while datagrams flow.
func TestScenarioChangesWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := netsim.NewNetwork(1)
		defer network.Close()
		a, _ := network.Listen(simA, netsim.Impairment{})
		b, _ := network.Listen(simB, netsim.Impairment{})
		sc := parse(t, "link: {delay: 10ms}")
		if err := sc.Apply(network, simA, simB); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		for _, want := range []time.Duration{10 * time.Millisecond, 40 * time.Millisecond} {
			start := time.Now()
			_, _ = a.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(simB))
			if _, _, err := b.ReadFrom(buf); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != want {
				t.Fatalf("delay %v, want %v", got, want)
			}
			sc.AToB.Delay = 40 * time.Millisecond
			if err := sc.Apply(network, simA, simB); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestParseScenario(t *testing.T) {
	sc := parse(t, `
name: wan
seed: 9
link: {delay: 25ms, loss: 1%, rate: 10Mbit/s, queue: 64}
b_to_a: {loss: 0.05, rate: 512kbit, jitter: 1ms}
`)
	want := netsim.Scenario{
		Name: "wan",
		AToB: netsim.Impairment{Delay: 25 * time.Millisecond, Loss: 0.01, Rate: 10e6, Queue: 64, Seed: 9},
		BToA: netsim.Impairment{Delay: 25 * time.Millisecond, Loss: 0.05, Rate: 512e3, Queue: 64, Jitter: time.Millisecond, Seed: 9},
	}
	if *sc != want {
		t.Fatalf("parsed %+v\nwant   %+v", *sc, want)
	}
	if sc.RTT() != 50*time.Millisecond {
		t.Fatalf("RTT %v", sc.RTT())
	}
	for _, bad := range []struct{ text, want string }{
		{"link: {delai: 25ms}", "delai"},
		{"link: {delay: soon}", "soon"},
		{"link: {loss: 150%}", "Loss"},
		{"link: {rate: fast}", "fast"},
		{"a_to_b: {queue: -1}", "Queue"},
		{"link: {bursts: {good_to_bad: 0.1}}", "never leaves"},
	} {
		if _, err := netsim.ParseScenario([]byte(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseScenario(%q) = %v, want an error about %s", bad.text, err, bad.want)
		}
	}
	if sc, err := netsim.ParseScenario(nil); err != nil || *sc != (netsim.Scenario{}) {
		t.Errorf("an empty scenario: %+v, %v; want a perfect link", sc, err)
	}
}
