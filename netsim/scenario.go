package netsim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Scenario is a link between two endpoints, a and b, described per
// direction: the file format that both this package and cmd/raet-netem
// (the emulator for real processes) read, so that a test and a benchmark
// over namespaces can share one description.
//
// A scenario file is YAML. "link" applies to both directions, and "a_to_b"
// and "b_to_a" override its fields for one direction:
//
//	name: wan-50ms-1pct        # optional
//	seed: 1                    # the directions' Impairment.Seed
//	link:
//	  delay: 25ms              # one way; Go durations (ms, us, s)
//	  jitter: 2ms              # uniform within delay ± jitter, in order
//	  loss: 1%                 # or 0.01
//	  rate: 10Mbit             # bits per second: 512kbit, 10Mbit, 1Gbit, 1e6
//	  queue: 100               # datagrams waiting for the rate (drop-tail)
//	a_to_b:
//	  loss: 2%
//
// The other fields of a direction are duplicate, reorder (fractions),
// reorder_delay (a duration), jitter_reorders (a bool), burst (bytes of the
// token bucket), limit (datagrams in flight) and bursts, a Gilbert-Elliott
// channel: {good_to_bad, bad_to_good, good_loss, bad_loss}, all fractions.
// Unknown fields are an error, so a misspelt one is not silently ignored.
type Scenario struct {
	// Name names the scenario in reports; it may be empty.
	Name string
	// AToB impairs what a sends to b; BToA what b sends to a.
	AToB, BToA Impairment
}

// RTT returns the round-trip time the scenario adds: both directions'
// delays.
func (s *Scenario) RTT() time.Duration { return s.AToB.Delay + s.BToA.Delay }

// Apply impairs the Network's links between a and b with the scenario,
// both ways (as Network.SetImpairment does, so that it can change while
// the conns run).
func (s *Scenario) Apply(n *Network, a, b netip.AddrPort) error {
	if err := n.SetImpairment(a, b, s.AToB); err != nil {
		return fmt.Errorf("netsim: scenario %q: %w", s.Name, err)
	}
	if err := n.SetImpairment(b, a, s.BToA); err != nil {
		return fmt.Errorf("netsim: scenario %q: %w", s.Name, err)
	}
	return nil
}

// LoadScenario reads and parses a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("netsim: scenario: %w", err)
	}
	s, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

// ParseScenario parses a scenario file's text and validates both
// directions.
func ParseScenario(data []byte) (*Scenario, error) {
	var f scenarioFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // an empty file is a perfect link
		return nil, fmt.Errorf("netsim: scenario: %w", err)
	}
	s := &Scenario{Name: f.Name}
	s.AToB.Seed, s.BToA.Seed = f.Seed, f.Seed
	f.Link.apply(&s.AToB)
	f.Link.apply(&s.BToA)
	f.AToB.apply(&s.AToB)
	f.BToA.apply(&s.BToA)
	if err := s.AToB.Validate(); err != nil {
		return nil, fmt.Errorf("netsim: scenario a_to_b: %w", err)
	}
	if err := s.BToA.Validate(); err != nil {
		return nil, fmt.Errorf("netsim: scenario b_to_a: %w", err)
	}
	return s, nil
}

// scenarioFile is the YAML form of a Scenario.
type scenarioFile struct {
	Name string    `yaml:"name"`
	Seed uint64    `yaml:"seed"`
	Link direction `yaml:"link"`
	AToB direction `yaml:"a_to_b"`
	BToA direction `yaml:"b_to_a"`
}

// direction is the YAML form of an Impairment; a nil field is not set.
type direction struct {
	Delay          *duration      `yaml:"delay"`
	Jitter         *duration      `yaml:"jitter"`
	JitterReorders *bool          `yaml:"jitter_reorders"`
	Loss           *fraction      `yaml:"loss"`
	Duplicate      *fraction      `yaml:"duplicate"`
	Reorder        *fraction      `yaml:"reorder"`
	ReorderDelay   *duration      `yaml:"reorder_delay"`
	Rate           *bitrate       `yaml:"rate"`
	Burst          *int           `yaml:"burst"`
	Queue          *int           `yaml:"queue"`
	Limit          *int           `yaml:"limit"`
	Bursts         *burstsSection `yaml:"bursts"`
}

type burstsSection struct {
	GoodToBad fraction `yaml:"good_to_bad"`
	BadToGood fraction `yaml:"bad_to_good"`
	GoodLoss  fraction `yaml:"good_loss"`
	BadLoss   fraction `yaml:"bad_loss"`
}

// apply sets the fields of imp that d sets.
func (d direction) apply(imp *Impairment) {
	setIf(&imp.Delay, (*time.Duration)(d.Delay))
	setIf(&imp.Jitter, (*time.Duration)(d.Jitter))
	setIf(&imp.JitterReorders, d.JitterReorders)
	setIf(&imp.Loss, (*float64)(d.Loss))
	setIf(&imp.Duplicate, (*float64)(d.Duplicate))
	setIf(&imp.Reorder, (*float64)(d.Reorder))
	setIf(&imp.ReorderDelay, (*time.Duration)(d.ReorderDelay))
	setIf(&imp.Rate, (*float64)(d.Rate))
	setIf(&imp.Burst, d.Burst)
	setIf(&imp.Queue, d.Queue)
	setIf(&imp.Limit, d.Limit)
	if b := d.Bursts; b != nil {
		imp.Bursts = GilbertElliott{
			GoodToBad: float64(b.GoodToBad), BadToGood: float64(b.BadToGood),
			GoodLoss: float64(b.GoodLoss), BadLoss: float64(b.BadLoss),
		}
	}
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// duration is a time.Duration written as Go writes it ("25ms").
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = duration(v)
	return nil
}

// fraction is a probability written as a number (0.01) or a percentage
// ("1%").
type fraction float64

func (f *fraction) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseFraction(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*f = fraction(v)
	return nil
}

// ParseFraction parses a probability written as a number ("0.01") or a
// percentage ("1%").
func ParseFraction(s string) (float64, error) {
	s = strings.TrimSpace(s)
	scale := 1.0
	if t, ok := strings.CutSuffix(s, "%"); ok {
		s, scale = strings.TrimSpace(t), 100
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("fraction %q: %w", s, err)
	}
	return v / scale, nil
}

// bitrate is a bandwidth in bits per second, written with an optional unit.
type bitrate float64

func (r *bitrate) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseRate(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*r = bitrate(v)
	return nil
}

// ParseRate parses a bandwidth in bits per second: a number with an
// optional unit bit, kbit, Mbit or Gbit (decimal, case-insensitive, "/s"
// or "ps" allowed after it): "10Mbit", "512kbit/s", "1e6".
func ParseRate(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "/s"), "ps")
	t = strings.TrimSuffix(t, "it")
	scale := 1.0
	switch {
	case strings.HasSuffix(t, "gb"):
		scale, t = 1e9, strings.TrimSuffix(t, "gb")
	case strings.HasSuffix(t, "mb"):
		scale, t = 1e6, strings.TrimSuffix(t, "mb")
	case strings.HasSuffix(t, "kb"):
		scale, t = 1e3, strings.TrimSuffix(t, "kb")
	case strings.HasSuffix(t, "b"):
		t = strings.TrimSuffix(t, "b")
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil {
		return 0, fmt.Errorf("rate %q: want bits per second such as 10Mbit", s)
	}
	return v * scale, nil
}
