// Command raetdump shows RAET traffic: road datagrams and lane pages, read
// from a capture file or captured live, decoded, verified, decrypted and
// followed transaction by transaction.
//
//	raetdump -r road.pcapng                        one line per packet, then a summary
//	raetdump -r road.pcapng -v -keep main/keep -keylog keys.log
//	raetdump -r road.pcapng -json                  one JSON object per packet
//	raetdump -r road.pcapng -T                     one line per transaction
//	raetdump -r road.pcapng -flow out.svg          a sequence diagram (or out.html)
//	raetdump -i lo -c 100 udp port 7530            live (needs -tags pcap and libpcap)
//	raetdump -i lo -w out.pcapng                   save what is captured
//
// Flags follow tcpdump: -r FILE (pcap or pcapng, "-" for stdin), -i IFACE,
// -c COUNT, -w FILE, a BPF filter expression as the arguments, -v, -x.
// Then: -p PORTS (RAET's UDP ports besides 7530, "7531,40000-40100"),
// -json, -T, -keep DIR (repeatable; a keep's keys verify feet), -keylog
// FILE (repeatable; the stacks' RAET_SESSION lines open coats, docs/keylog.md),
// -flow FILE (a sequence diagram, SVG or HTML), -txlog FILE (the transaction
// log, docs/txlog.md), -q (no summary).
//
// Exit status: 0 when everything read was decoded, 1 when some packets or
// the capture itself had errors (they are shown and counted), 2 for bad
// usage, 3 when the input cannot be opened.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/internal/buildinfo"
)

const (
	exitOK     = 0
	exitErrors = 1
	exitUsage  = 2
	exitInput  = 3
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// source is where records come from: a file or a live capture.
type source interface {
	Next() (dissect.Record, error) // io.EOF at the end
	Close() error
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	read, iface, write   string
	count                int
	ports                []uint16
	verbose, hexdump     bool
	json, txns, quiet    bool
	keeps, keylogs       listFlag
	txlog                string
	flow                 string
	filter               string
	snaplen              int
	dedup                bool
	stdin                io.Reader
	stdout, stderr       io.Writer
	interrupt            <-chan os.Signal
	liveReadyForTestHook func()
}

const usageText = `usage: raetdump [-r FILE | -i INTERFACE] [flags] [BPF filter expression]

Show RAET traffic, road datagrams and lane pages, from a pcap or pcapng file
(raet serve --pcap FILE makes one) or captured live: decoded, signatures
verified with the keys of -keep, coats opened with the session keys of
-keylog (raet serve --keylog FILE), and with -T followed transaction by
transaction.

flags:
`

const exitText = `
examples:
  raetdump -r road.pcapng -keep /tmp/a -keylog keys.log -T
  raetdump -r road.pcapng -q -txlog txns.jsonl   (diff it with raet serve --txlog)
  raetdump -r road.pcapng -keylog keys.log -q -flow flow.svg   (or flow.html)
  raetdump -i lo -c 100 udp port 7530     (a build with -tags pcap)

exit status: 0 everything read was decoded; 1 some packets or the capture
had errors (shown and counted); 2 bad usage; 3 the input cannot be opened.
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raetdump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var ports string
	fs.StringVar(&o.read, "r", "", "read packets from a pcap or pcapng `file` (- for stdin)")
	fs.StringVar(&o.iface, "i", "", "capture live on `interface` (needs a build with -tags pcap)")
	fs.StringVar(&o.write, "w", "", "write the captured frames to a pcapng `file` instead of showing them")
	fs.IntVar(&o.count, "c", 0, "stop after `count` RAET packets")
	fs.StringVar(&ports, "p", "", "RAET UDP `ports` besides 7530: a list of ports and ranges, 7531,40000-40100")
	fs.BoolVar(&o.verbose, "v", false, "show every head field, the body and the transaction")
	fs.BoolVar(&o.hexdump, "x", false, "show each datagram in hex")
	fs.BoolVar(&o.json, "json", false, "one JSON object per packet")
	fs.BoolVar(&o.txns, "T", false, "show transactions instead of packets")
	fs.BoolVar(&o.quiet, "q", false, "no summary at the end")
	fs.StringVar(&o.txlog, "txlog", "", "also write the transaction log, JSON lines (docs/txlog.md), to `file`")
	fs.Var(&o.keeps, "keep", "a keep `dir`ectory whose keys verify feet (repeatable)")
	fs.Var(&o.keylogs, "keylog", "a key log `file` of RAET_SESSION lines that opens coats (repeatable; docs/keylog.md)")
	fs.StringVar(&o.flow, "flow", "", "draw the packets as a sequence diagram in this `file`: .svg, or .html for a page")
	fs.IntVar(&o.snaplen, "s", 262144, "live capture: bytes to capture of each frame")
	fs.BoolVar(&o.dedup, "dedup", true, "live capture on loopback: show a frame seen twice once")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fmt.Fprint(stdout, exitText)
			return exitOK
		}
		fmt.Fprintln(stderr, "run 'raetdump -help' for usage")
		return exitUsage
	}
	if *version {
		fmt.Fprintln(stdout, buildinfo.Version("raetdump"))
		return exitOK
	}
	o.filter = strings.Join(fs.Args(), " ")
	if (o.read == "") == (o.iface == "") {
		fmt.Fprintln(stderr, "raetdump: give exactly one of -r FILE and -i INTERFACE")
		return exitUsage
	}
	o.ports = []uint16{dissect.DefaultPort}
	if ports != "" {
		ps, err := parsePorts(ports)
		if err != nil {
			fmt.Fprintln(stderr, "raetdump: -p:", err)
			return exitUsage
		}
		o.ports = append(o.ports, ps...)
	}
	o.stdin, o.stdout, o.stderr = stdin, stdout, stderr
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	o.interrupt = sig
	return o.run()
}

// parsePorts parses "7531,40000-40100".
func parsePorts(s string) ([]uint16, error) {
	var out []uint16
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil || a == 0 {
			return nil, fmt.Errorf("bad port %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 16); err != nil || b < a {
				return nil, fmt.Errorf("bad port range %q", part)
			}
		}
		if b-a >= 65535 {
			return nil, fmt.Errorf("bad port range %q", part)
		}
		for p := a; p <= b; p++ {
			out = append(out, uint16(p))
		}
	}
	return out, nil
}

func (o *options) run() int {
	keys := dissect.NewKeyRing()
	for _, dir := range o.keeps {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			fmt.Fprintf(o.stderr, "raetdump: -keep %s: not a keep directory: %v\n", dir, err)
			return exitInput
		}
		// A corrupt file is reported; the keep's other keys still serve.
		if err := keys.AddKeep(dir); err != nil {
			fmt.Fprintf(o.stderr, "raetdump: -keep %s: %v\n", dir, err)
		}
	}
	for _, file := range o.keylogs {
		if err := keys.AddKeyLogFile(file); errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			fmt.Fprintln(o.stderr, "raetdump: -keylog:", err)
			return exitInput
		} else if err != nil {
			fmt.Fprintln(o.stderr, "raetdump: -keylog", err)
		}
	}
	for _, p := range o.ports {
		dissect.RegisterPort(p)
	}

	var src source
	var err error
	live := o.iface != ""
	if live {
		// A capture on a loopback device sees each frame twice, sent and
		// received: with dedup it takes only the received copies.
		src, err = openLive(o.iface, o.snaplen, o.filter, o.dedup && isLoopback(o.iface))
	} else {
		src, err = o.openFile()
	}
	if err != nil {
		fmt.Fprintln(o.stderr, "raetdump:", err)
		return exitInput
	}
	defer src.Close()
	var match func(dissect.Record) bool
	if !live && o.filter != "" {
		if match, err = newFilter(o.filter, o.snaplen); err != nil {
			fmt.Fprintln(o.stderr, "raetdump:", err)
			return exitUsage
		}
	}

	out := bufio.NewWriterSize(o.stdout, 64<<10)
	defer out.Flush()
	pr := &printer{w: out, verbose: o.verbose, hex: o.hexdump, json: o.json}
	cfg := &dissect.Config{Keys: keys, Ports: o.ports}
	if o.txns {
		cfg.OnClose = pr.transaction
	}
	tl, endTxLog, err := o.openTxLog(cfg)
	if err != nil {
		fmt.Fprintln(o.stderr, "raetdump:", err)
		return exitInput
	}
	d := dissect.NewDissector(cfg)

	var w *dissect.PcapngWriter
	var saved func() error
	if o.write != "" {
		wf, err := os.Create(o.write)
		if err != nil {
			fmt.Fprintln(o.stderr, "raetdump:", err)
			return exitInput
		}
		defer wf.Close()
		bw := bufio.NewWriterSize(wf, 256<<10)
		saved = func() error {
			if err := bw.Flush(); err != nil {
				return err
			}
			return wf.Close()
		}
		if w, err = dissect.NewPcapngWriter(bw, &dissect.WriterOptions{Application: "raetdump"}); err != nil {
			fmt.Fprintln(o.stderr, "raetdump:", err)
			return exitInput
		}
	}

	dedupAny := live && o.dedup && o.iface == "any"
	next := func() (recResult, bool) {
		select {
		case <-o.interrupt:
			return recResult{}, false
		default:
		}
		rec, err := src.Next()
		return recResult{rec, err}, true
	}
	if live {
		// Live reads block: read in a goroutine so that an interrupt ends
		// the capture at once.
		recs := make(chan recResult)
		stop := make(chan struct{})
		go func() {
			defer close(recs)
			for {
				rec, err := src.Next()
				if err == nil {
					rec.Data = append([]byte(nil), rec.Data...)
				}
				select {
				case recs <- recResult{rec, err}:
				case <-stop:
					return
				}
				if err != nil {
					return
				}
			}
		}()
		defer close(stop)
		next = func() (recResult, bool) {
			select {
			case r, ok := <-recs:
				return r, ok
			case <-o.interrupt:
				return recResult{}, false
			}
		}
	}
	if o.liveReadyForTestHook != nil {
		o.liveReadyForTestHook()
	}

	var fl *flow
	if o.flow != "" {
		fl = newFlow()
	}
	var p dissect.Packet
	shown, status := 0, exitOK
	for {
		r, ok := next()
		if !ok {
			break
		}
		if r.err != nil {
			if r.err != io.EOF {
				d.SetCaptureError(r.err)
				fmt.Fprintln(o.stderr, "raetdump:", r.err)
				status = exitErrors
			}
			break
		}
		if match != nil && !match(r.rec) {
			continue
		}
		if dedupAny && sentOnLoopback(r.rec) {
			d.CountDuplicate()
			continue
		}
		if w != nil {
			if err := w.WriteRecord(r.rec); err != nil {
				fmt.Fprintln(o.stderr, "raetdump: -w:", err)
				return exitInput
			}
		}
		// A GSO super-datagram holds several packets: Next gives the
		// ones after the first.
		done := false
		for ok := d.DecodeInto(r.rec, &p); ok && !done; ok = d.Next(&p) {
			if p.Err != nil {
				status = exitErrors
			}
			if w == nil && !o.txns {
				pr.packet(&p)
			}
			if fl != nil {
				fl.add(&p)
			}
			if tl != nil {
				tl.Packet(&p)
			}
			shown++
			done = o.count > 0 && shown >= o.count
		}
		if done {
			break
		}
	}
	d.Flush()
	if err := endTxLog(); err != nil {
		fmt.Fprintln(o.stderr, "raetdump:", err)
		return exitInput
	}
	if fl != nil {
		if err := o.writeFlow(fl); err != nil {
			fmt.Fprintln(o.stderr, "raetdump: -flow:", err)
			return exitInput
		}
	}
	if saved != nil {
		if err := saved(); err != nil {
			fmt.Fprintln(o.stderr, "raetdump: -w:", err)
			return exitInput
		}
	}
	if !o.quiet {
		if o.json || w != nil {
			out.Flush()
			d.Stats().WriteText(o.stderr)
		} else {
			if !o.txns || shown > 0 {
				fmt.Fprintln(out)
			}
			d.Stats().WriteText(out)
		}
	}
	if err := out.Flush(); err != nil {
		return exitInput
	}
	return status
}

// writeFlow writes the diagram to o.flow: an HTML page for .html and
// .htm, else SVG.
func (o *options) writeFlow(fl *flow) error {
	f, err := os.Create(o.flow)
	if err != nil {
		return err
	}
	write := fl.writeSVG
	if ext := strings.ToLower(filepath.Ext(o.flow)); ext == ".html" || ext == ".htm" {
		write = fl.writeHTML
	}
	return errors.Join(write(f), f.Close())
}

type recResult struct {
	rec dissect.Record
	err error
}

// fileSource reads a capture file.
type fileSource struct {
	r *dissect.CaptureReader
	c io.Closer
}

func (f *fileSource) Next() (dissect.Record, error) { return f.r.Next() }
func (f *fileSource) Close() error {
	if f.c != nil {
		return f.c.Close()
	}
	return nil
}

func (o *options) openFile() (source, error) {
	var r io.Reader = o.stdin
	var c io.Closer
	if o.read != "-" {
		f, err := os.Open(o.read)
		if err != nil {
			return nil, err
		}
		r, c = f, f
	}
	cr, err := dissect.NewCaptureReader(r)
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("%s: %w", o.read, err)
	}
	return &fileSource{r: cr, c: c}, nil
}

// sentOnLoopback reports whether a cooked ("any") frame is the sent copy of
// a frame on a loopback device, which the capture sees again as received:
// its link header says the device type (ARPHRD_LOOPBACK) and direction
// (PACKET_OUTGOING).
func sentOnLoopback(rec dissect.Record) bool {
	const arphrdLoopback, packetOutgoing = 772, 4
	d := rec.Data
	switch {
	case rec.LinkType == dissect.LinkTypeLinuxSLL && len(d) >= 16:
		return binary.BigEndian.Uint16(d[2:]) == arphrdLoopback && binary.BigEndian.Uint16(d[0:]) == packetOutgoing
	case rec.LinkType == dissect.LinkTypeLinuxSLL2 && len(d) >= 20:
		return binary.BigEndian.Uint16(d[8:]) == arphrdLoopback && d[10] == packetOutgoing
	}
	return false
}
