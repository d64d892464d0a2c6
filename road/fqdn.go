package road

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// The allower's initiate carries its idea of the allowent's fully qualified
// domain name (§8.3), and the reference, as allowent, logs "Mismatch of
// local fqdn" unless it is the name its socket.getfqdn gives its own host.
// So a stack sends, for a remote, what getfqdn gives the remote's address:
// the first of the names the hosts file has for it with a dot in it, else
// the first. Only the hosts file: a reverse DNS query per remote would send
// a main's resolver a query for every address that joins (and a test's
// 127.x.y.z addresses to the network), and a Join would wait on it. The core asks on the owner, which
// must not wait for DNS: a name not known yet is looked up behind it and
// taken by the next allow; Join looks up the address it joins first.

// fqdnLookupTime bounds one lookup.
const fqdnLookupTime = 2 * time.Second

// maxFQDNs bounds the names kept (a main of many remotes keeps the first).
const maxFQDNs = 4096

// fqdns holds the names found for addresses ("" while a lookup is under
// way, or when none was found).
type fqdns struct {
	mu      sync.Mutex
	names   map[netip.Addr]string
	lookups sync.WaitGroup
}

// pickFQDN is getfqdn's choice among an address's names.
func pickFQDN(names []string) string {
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".")
	}
	for _, n := range names {
		if strings.Contains(n, ".") {
			return n
		}
	}
	if len(names) > 0 {
		return names[0]
	}
	return ""
}

// hostsOnly answers from the hosts file: its Dial refuses every DNS server.
var hostsOnly = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("raet: fqdn: names come from the hosts file only")
}}

// lookupFQDN finds a's name now.
func lookupFQDN(ctx context.Context, a netip.Addr) string {
	ctx, cancel := context.WithTimeout(ctx, fqdnLookupTime)
	defer cancel()
	names, err := hostsOnly.LookupAddr(ctx, a.Unmap().String())
	if err != nil {
		return ""
	}
	return pickFQDN(names)
}

// store keeps a's name.
func (f *fqdns) store(a netip.Addr, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.names == nil {
		f.names = make(map[netip.Addr]string)
	}
	if _, ok := f.names[a]; ok || len(f.names) < maxFQDNs {
		f.names[a] = name
	}
}

// warm looks a up now, unless it was.
func (f *fqdns) warm(ctx context.Context, a netip.Addr) {
	f.mu.Lock()
	_, ok := f.names[a]
	f.mu.Unlock()
	if !ok {
		f.store(a, lookupFQDN(ctx, a))
	}
}

// get is a's name when known; else "" and, within maxFQDNs, a lookup
// starts behind the caller (bounded by life).
func (f *fqdns) get(life context.Context, a netip.Addr) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name, ok := f.names[a]; ok {
		return name
	}
	if f.names == nil {
		f.names = make(map[netip.Addr]string)
	}
	if len(f.names) >= maxFQDNs || life.Err() != nil {
		return ""
	}
	f.names[a] = ""
	f.lookups.Add(1)
	go func() {
		defer f.lookups.Done()
		name := lookupFQDN(life, a)
		f.mu.Lock()
		f.names[a] = name
		f.mu.Unlock()
	}()
	return ""
}
