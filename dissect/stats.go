package dissect

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/raet-go/raet/codec"
)

// Stats counts what a Dissector saw. Maps are keyed by readable names.
type Stats struct {
	Records    int // frames read
	Road       int // road packets decoded (head read)
	Lane       int // lane pages decoded
	Errors     int // packets and frames that could not be decoded
	Other      int // frames that are not RAET (other protocols and ports)
	Fragments  int // IP fragments, not reassembled
	Duplicates int // loopback copies suppressed in live captures
	GSO        int // UDP GSO super-datagrams (several packets captured as one datagram), split into their packets

	ErrorReasons map[string]int // why packets could not be decoded
	Warnings     map[string]int // problems with decoded packets
	Kinds        map[string]int // "tk/pk" of road packets, "lane" for pages
	HeadKinds    map[string]int

	Verified      int // feet verified
	VerifyFailed  int // feet that do not verify with the key found
	VerifyUnknown int // signed, but no key for the sender
	Unsigned      int // no foot
	AEAD          int // no foot: an AEAD coat authenticates head and body
	AEADOpened    int // AEAD coats opened with the key log (so authenticated)
	Opened        int // coats opened (or plain bodies read)
	Sealed        int // coats that no key opened

	Retransmits    int
	ResendRequests int
	Requested      int // segment numbers asked for in the resends read
	StaleNacks     int
	TimedOut       int
	Evicted        int

	Txns map[codec.TransactionKind]*TxnStats

	First, Last  time.Time
	CaptureError string // why reading the capture stopped early

	kinds map[[2]uint8]int // road packets by tk and pk, named into Kinds
}

// nameKinds fills Kinds from the counts by number.
func (s *Stats) nameKinds() {
	for k, n := range s.kinds {
		name := codec.TransactionKind(k[0]).String() + "/" + codec.PacketKind(k[1]).String()
		if _, ok := s.Kinds[name]; !ok && len(s.Kinds) >= maxReasons {
			name = "other"
		}
		s.Kinds[name] += n
	}
	clear(s.kinds)
}

// TxnStats counts the transactions of one kind.
type TxnStats struct {
	Count             int
	Outcomes          map[Outcome]int
	Done              int
	Min, Max, Total   time.Duration // of the transactions done
	Retransmits       int
	Segments, Missing int
	Reassembled       int
	Packets           int
	SlowestID         int // the transaction that took Max
}

// NewStats returns empty statistics.
func NewStats() *Stats {
	return &Stats{ErrorReasons: map[string]int{}, Warnings: map[string]int{}, Kinds: map[string]int{},
		HeadKinds: map[string]int{}, Txns: map[codec.TransactionKind]*TxnStats{}, kinds: map[[2]uint8]int{}}
}

// maxReasons bounds the distinct reasons counted; more go under "other".
const maxReasons = 64

func addReason(m map[string]int, reason string) {
	if _, ok := m[reason]; !ok && len(m) >= maxReasons {
		reason = "other"
	}
	m[reason]++
}

func (s *Stats) addError(reason string)   { addReason(s.Warnings, reason) }
func (s *Stats) addFailure(reason string) { s.Errors++; addReason(s.ErrorReasons, reason) }

func (s *Stats) addTxn(tx *Transaction) {
	ts := s.Txns[tx.Kind]
	if ts == nil {
		ts = &TxnStats{Outcomes: map[Outcome]int{}}
		s.Txns[tx.Kind] = ts
	}
	ts.Count++
	ts.Outcomes[tx.Outcome]++
	ts.Retransmits += tx.Retransmits
	ts.Segments += tx.Segments
	ts.Missing += tx.Missing
	ts.Packets += tx.Packets
	if tx.Reassembled && tx.Segments > 1 {
		ts.Reassembled++
	}
	if tx.Outcome == Done {
		d := tx.Duration()
		if ts.Done == 0 || d < ts.Min {
			ts.Min = d
		}
		if d > ts.Max {
			ts.Max = d
			ts.SlowestID = tx.ID
		}
		ts.Done++
		ts.Total += d
	}
}

func sortedKeys[K comparable](m map[K]int, less func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, less)
	return keys
}

func countList(m map[string]int) string {
	keys := sortedKeys(m, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// WriteText writes the summary for people.
func (s *Stats) WriteText(w io.Writer) {
	s.nameKinds()
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	span := ""
	if !s.First.IsZero() {
		span = fmt.Sprintf(" over %s", fmtDuration(s.Last.Sub(s.First)))
	}
	p("summary: %d frames%s: %d road packets and %d lane pages read, %d packets with errors, %d other frames skipped",
		s.Records, span, s.Road, s.Lane, s.Errors, s.Other)
	if s.Fragments > 0 {
		p("  ip fragments (not reassembled): %d", s.Fragments)
	}
	if s.Duplicates > 0 {
		p("  loopback duplicates suppressed: %d", s.Duplicates)
	}
	if s.GSO > 0 {
		p("  gso super-datagrams split into their packets: %d", s.GSO)
	}
	if len(s.Kinds) > 0 {
		p("  packets by kind: %s", countList(s.Kinds))
	}
	if len(s.HeadKinds) > 0 {
		p("  head kinds: %s", countList(s.HeadKinds))
	}
	if s.Road > 0 {
		p("  feet: %d verified, %d failed, %d with no key, %d unsigned", s.Verified, s.VerifyFailed, s.VerifyUnknown, s.Unsigned)
		if s.AEAD > 0 {
			p("  aead coats: %d packets, %d opened with the key log (authenticated), %d not checked (no key-log session for them)",
				s.AEAD, s.AEADOpened, s.AEAD-s.AEADOpened)
		}
		p("  bodies: %d read, %d sealed (no key opened them)", s.Opened, s.Sealed)
	}
	if len(s.ErrorReasons) > 0 {
		p("  errors by reason: %s", countList(s.ErrorReasons))
	}
	if len(s.Warnings) > 0 {
		p("  warnings: %s", countList(s.Warnings))
	}
	p("  retransmits %d, resend requests %d (%d segments asked for), stale nacks %d, timeouts %d, evicted %d",
		s.Retransmits, s.ResendRequests, s.Requested, s.StaleNacks, s.TimedOut, s.Evicted)
	kinds := make([]codec.TransactionKind, 0, len(s.Txns))
	for k := range s.Txns {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		ts := s.Txns[k]
		outs := make([]string, 0, len(ts.Outcomes))
		for _, o := range sortedKeys(ts.Outcomes, func(a, b Outcome) int { return int(a) - int(b) }) {
			outs = append(outs, fmt.Sprintf("%s %d", o, ts.Outcomes[o]))
		}
		line := fmt.Sprintf("  %s transactions: %d (%s)", k, ts.Count, strings.Join(outs, ", "))
		if ts.Done > 0 {
			line += fmt.Sprintf("; time min/avg/max %s/%s/%s", fmtDuration(ts.Min),
				fmtDuration(ts.Total/time.Duration(ts.Done)), fmtDuration(ts.Max))
		}
		if ts.Segments > ts.Count && k == codec.TransactionKindMessage {
			line += fmt.Sprintf("; %d segments, %d never seen, %d messages reassembled", ts.Segments, ts.Missing, ts.Reassembled)
		}
		if ts.Retransmits > 0 {
			line += fmt.Sprintf("; %d retransmits", ts.Retransmits)
		}
		p("%s", line)
	}
	if s.CaptureError != "" {
		p("  capture: %s", s.CaptureError)
	}
}
