package netsim_test

import (
	"fmt"
	"log"
	"net"
	"net/netip"
	"time"

	"github.com/raet-go/raet/netsim"
)

// Two estates on an in-memory network: one direction is cut, then healed.
func ExampleNetwork() {
	network := netsim.NewNetwork(1) // the seed: rerun with it to replay a failure
	defer network.Close()

	alpha := netip.MustParseAddrPort("10.0.0.1:7530")
	beta := netip.MustParseAddrPort("10.0.0.2:7530")
	a, err := network.Listen(alpha, netsim.Impairment{})
	if err != nil {
		log.Fatal(err)
	}
	// Everything sent to beta waits 5ms and is lost 1 time in 100.
	b, err := network.Listen(beta, netsim.Impairment{Delay: 5 * time.Millisecond, Loss: 0.01})
	if err != nil {
		log.Fatal(err)
	}

	// Partition alpha from beta.
	if err := network.SetImpairment(alpha, beta, netsim.Impairment{Loss: 1}); err != nil {
		log.Fatal(err)
	}
	_, _ = a.WriteTo([]byte("lost"), net.UDPAddrFromAddrPort(beta))

	// Heal: beta's own impairment applies again.
	network.ResetImpairment(alpha, beta)
	_, _ = a.WriteTo([]byte("hello"), net.UDPAddrFromAddrPort(beta))

	buf := make([]byte, 64)
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := b.ReadFrom(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s from %v\n", buf[:n], from)
	s := network.LinkStats(alpha, beta)
	fmt.Printf("received %d, dropped %d, delayed %d\n", s.Received, s.Dropped, s.Delayed)
	// Output:
	// hello from 10.0.0.1:7530
	// received 2, dropped 1, delayed 1
}

// A relay between two real UDP sockets on the loopback interface; each side
// replies to the source address, as a RAET road does.
func ExampleRelay() {
	a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	relay, err := netsim.NewRelay(
		a.LocalAddr().(*net.UDPAddr).AddrPort(),
		b.LocalAddr().(*net.UDPAddr).AddrPort(),
		netsim.Impairment{Delay: 10 * time.Millisecond, Seed: 42}, // a to b
		netsim.Impairment{},                                       // b to a
	)
	if err != nil {
		log.Fatal(err)
	}
	defer relay.Close()

	// A sends to B's stand-in; B answers whoever sent it.
	_, _ = a.WriteToUDPAddrPort([]byte("ping"), relay.ForA())
	buf := make([]byte, 64)
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := b.ReadFromUDPAddrPort(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("B got %q from the relay: %v\n", buf[:n], from == relay.ForB())
	_, _ = b.WriteToUDPAddrPort([]byte("pong"), from)
	_ = a.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err = a.ReadFromUDPAddrPort(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("A got %q from the relay: %v\n", buf[:n], from == relay.ForA())
	s := relay.Stats()
	fmt.Printf("a to b: %d delayed; b to a: %d forwarded\n", s.AToB.Delayed, s.BToA.Forwarded)
	// Output:
	// B got "ping" from the relay: true
	// A got "pong" from the relay: true
	// a to b: 1 delayed; b to a: 1 forwarded
}

// A scenario file describes both directions of a link; the same file drives
// cmd/raet-netem between network namespaces. In a test, run the network in
// a synctest bubble and the 25 ms pass in fake time.
func ExampleParseScenario() {
	sc, err := netsim.ParseScenario([]byte(`
name: wan
seed: 1
link: {delay: 25ms, loss: 1%, rate: 10Mbit, queue: 100}
b_to_a: {loss: 0}
`))
	if err != nil {
		log.Fatal(err)
	}
	network := netsim.NewNetwork(1)
	defer network.Close()
	alpha := netip.MustParseAddrPort("10.0.0.1:7530")
	beta := netip.MustParseAddrPort("10.0.0.2:7530")
	a, _ := network.Listen(alpha, netsim.Impairment{})
	b, _ := network.Listen(beta, netsim.Impairment{})
	if err := sc.Apply(network, alpha, beta); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	_, _ = a.WriteTo([]byte("hello"), net.UDPAddrFromAddrPort(beta))
	buf := make([]byte, 64)
	n, _, err := b.ReadFrom(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q after at least %v; RTT %v, %.0f%% loss back\n", buf[:n],
		time.Since(start).Round(25*time.Millisecond), sc.RTT(), 100*sc.BToA.Loss)
	// Output:
	// "hello" after at least 25ms; RTT 50ms, 0% loss back
}

// Loss in bursts: a Gilbert-Elliott channel that enters its bad state for
// 1 datagram in 20 and stays there for 3 on average, losing all it carries
// there. Fates draws the same fates as a Network would, without a clock.
func ExampleGilbertElliott() {
	bursts := netsim.GilbertElliott{GoodToBad: 0.05, BadToGood: 1.0 / 3, BadLoss: 1}
	fates, err := netsim.NewFates(netsim.Impairment{Bursts: bursts, Seed: 4})
	if err != nil {
		log.Fatal(err)
	}
	line := make([]byte, 60)
	for i := range line {
		line[i] = '.'
		if len(fates.Next(nil)) == 0 {
			line[i] = 'x'
		}
	}
	fmt.Println(string(line))
	fmt.Printf("mean loss %.3f\n", bursts.MeanLoss())
	// Output:
	// ..................x....................xxxxx................
	// mean loss 0.130
}
