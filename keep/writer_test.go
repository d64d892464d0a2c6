package keep

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// firstSyncHeld is a syncer whose first sync closes entered and waits for
// release to be closed: the batch it syncs is held while a test queues more.
func firstSyncHeld() (cs *countSyncer, entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	cs = &countSyncer{inner: fileSyncer{}, gate: func(n int64) {
		if n == 1 {
			close(entered)
			<-release
		}
	}}
	return cs, entered, release
}

// countSyncer counts the syncs of a Writer around the real syncer; gate,
// when set, is called at the start of every data sync (tests hold a batch
// there), and fail makes the given data sync fail.
type countSyncer struct {
	inner       syncer
	datas, dirs atomic.Int64
	files       atomic.Int64 // the files of the data syncs
	gate        func(call int64)
	failData    int64 // the data sync (1-based) that fails; 0: none
}

var errInjected = errors.New("injected sync failure")

func (c *countSyncer) data(dir string, files []*os.File) error {
	n := c.datas.Add(1)
	c.files.Add(int64(len(files)))
	if c.gate != nil {
		c.gate(n)
	}
	if n == c.failData {
		return errInjected
	}
	return c.inner.data(dir, files)
}

func (c *countSyncer) dir(dir string) error {
	c.dirs.Add(1)
	return c.inner.dir(dir)
}

// remoteN is the i-th record of the test sequences: one of seven names,
// carrying i in its SID.
func remoteN(i int) RemoteEstate {
	return RemoteEstate{Name: fmt.Sprintf("n%d", i%7), UID: 2, HA: HostPort{"127.0.0.1", 7531}, SID: uint32(i), Role: "r"}
}

// roleN is a role record carrying i in its keys.
func roleN(i int) RemoteRole {
	r := RemoteRole{Role: fmt.Sprintf("r%d", i%5), Acceptance: Accepted}
	binary.BigEndian.PutUint64(r.Verify[:], uint64(i))
	binary.BigEndian.PutUint64(r.Public[:], uint64(i))
	r.Verify[31], r.Public[31] = 1, 1
	return r
}

// TestWriterCoalescesSyncs: 200 writes queued while the writer syncs the
// first go to disk in one more batch: 2 data syncs and 2 directory syncs
// instead of the 400 fsyncs of Keep.SaveRemote.
func TestWriterCoalescesSyncs(t *testing.T) {
	defer goleak.VerifyNone(t)
	k := openKeep(t, AutoNever)
	cs, entered, release := firstSyncHeld()
	var durable []uint64
	var mu sync.Mutex
	w := k.StartWriter(&WriterConfig{sync: cs, OnDurable: func(seq uint64) {
		mu.Lock()
		durable = append(durable, seq)
		mu.Unlock()
	}})
	const n = 200
	var qs []*Queued
	for i := 1; i <= n; i++ {
		e := remoteN(i)
		e.Name = fmt.Sprintf("c%d", i)
		q, err := w.SaveRemote(e)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
		if i == 1 {
			<-entered // the first batch holds only the first write
		}
	}
	close(release)
	for _, q := range qs {
		if err := q.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if d, s := cs.datas.Load(), cs.dirs.Load(); d != 2 || s != 2 {
		t.Errorf("%d writes: %d data syncs and %d directory syncs, want 2 and 2", n, d, s)
	}
	if fmt.Sprint(durable) != "[1 200]" {
		t.Errorf("OnDurable got %v, want [1 200]", durable)
	}
	for i := 1; i <= n; i++ {
		e := must(k.LoadRemote(fmt.Sprintf("c%d", i)))(t)
		if e.SID != uint32(i) {
			t.Fatalf("c%d: sid %d", i, e.SID)
		}
		if qs[i-1].Seq() != uint64(i) {
			t.Fatalf("write %d has seq %d", i, qs[i-1].Seq())
		}
	}
	assertNoTemps(t, k)
}

// TestWriterAdjacentWritesOnce: writes to one file right after each other
// in a batch are made once, as the last; a write to another file between
// them keeps both.
func TestWriterAdjacentWritesOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	k := openKeep(t, AutoNever)
	cs, entered, release := firstSyncHeld()
	w := k.StartWriter(&WriterConfig{sync: cs})
	first := must(w.SaveRemote(remoteN(3)))(t) // a batch of its own
	<-entered
	for _, sid := range []int{7, 14, 21} { // all named n0
		must(w.SaveRemote(remoteN(sid)))(t)
	}
	must(w.SaveRemote(remoteN(1)))(t)
	last := must(w.SaveRemote(remoteN(28)))(t)
	close(release)
	if err := errors.Join(first.Wait(context.Background()), last.Wait(context.Background()), w.Close()); err != nil {
		t.Fatal(err)
	}
	if got := cs.files.Load(); got != 4 {
		t.Errorf("synced %d files, want 4 (n3, then n0 as 21, n1, n0 as 28)", got)
	}
	if e := must(k.LoadRemote("n0"))(t); e.SID != 28 {
		t.Errorf("n0 has sid %d, want 28", e.SID)
	}
}

// TestWriterCloseDrains: Close writes everything queued before it and
// stops the goroutine; later writes fail with ErrWriterClosed.
func TestWriterCloseDrains(t *testing.T) {
	defer goleak.VerifyNone(t)
	k := openKeep(t, AutoNever)
	w := k.StartWriter(&WriterConfig{MaxBatch: 16})
	var qs []*Queued
	for i := 1; i <= 100; i++ {
		qs = append(qs, must(w.SaveRemoteRole(roleN(i)))(t))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		select {
		case <-q.Done():
		default:
			t.Fatalf("write %d not done after Close", i+1)
		}
		if q.Err() != nil {
			t.Fatal(q.Err())
		}
	}
	for i := 96; i <= 100; i++ {
		if r := must(k.LoadRemoteRole(roleN(i).Role))(t); r != roleN(i) {
			t.Errorf("role %s: %+v, want write %d", r.Role, r, i)
		}
	}
	if _, err := w.SaveRemote(remoteN(1)); !errors.Is(err, ErrWriterClosed) {
		t.Errorf("write after Close: %v, want ErrWriterClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestWriterFailureIsSticky: when a batch fails, its writes and every
// later one fail with ErrWriterFailed, the keep holds the writes before
// it, and no temporary file is left.
func TestWriterFailureIsSticky(t *testing.T) {
	defer goleak.VerifyNone(t)
	k := openKeep(t, AutoNever)
	cs := &countSyncer{inner: fileSyncer{}, failData: 2}
	w := k.StartWriter(&WriterConfig{sync: cs})
	ok := must(w.SaveRemote(remoteN(1)))(t)
	if err := ok.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	bad := must(w.SaveRemote(remoteN(2)))(t)
	if err := bad.Wait(context.Background()); !errors.Is(err, ErrWriterFailed) || !errors.Is(err, errInjected) {
		t.Fatalf("failed write: %v, want ErrWriterFailed and the cause", err)
	}
	if _, err := w.SaveRemote(remoteN(3)); !errors.Is(err, ErrWriterFailed) {
		t.Errorf("write after the failure: %v, want ErrWriterFailed", err)
	}
	if err := w.Close(); !errors.Is(err, errInjected) {
		t.Errorf("Close: %v, want the failure", err)
	}
	names := must(k.RemoteNames())(t)
	if fmt.Sprint(names) != "[n1]" {
		t.Errorf("remotes on disk %v, want [n1]", names)
	}
	assertNoTemps(t, k)
}

// TestWriterStageFailure: a batch whose temporary files are written on
// several goroutines, one of which cannot be made (its directory is gone),
// fails as a whole with that file's error: none of its writes is renamed,
// not even those queued before the one that failed, and no temporary file
// is left.
func TestWriterStageFailure(t *testing.T) {
	defer goleak.VerifyNone(t)
	k := openKeep(t, AutoNever)
	cs, entered, release := firstSyncHeld()
	w := k.StartWriter(&WriterConfig{sync: cs})
	first := must(w.SaveRemote(remoteN(0)))(t)
	<-entered // the first batch holds only the first write
	rolePath := must(k.RemoteRolePath("x"))(t)
	if err := os.RemoveAll(filepath.Dir(rolePath)); err != nil {
		t.Fatal(err)
	}
	const n = 4 * stagers
	var qs []*Queued
	for i := range n {
		var q *Queued
		if i == n/2 {
			q = must(w.SaveRemoteRole(roleN(i)))(t) // its directory is gone
		} else {
			e := remoteN(i)
			e.Name = fmt.Sprintf("c%d", i)
			q = must(w.SaveRemote(e))(t)
		}
		qs = append(qs, q)
	}
	close(release)
	if err := first.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		err := q.Wait(context.Background())
		var fe *FileError
		if !errors.Is(err, ErrWriterFailed) || !errors.As(err, &fe) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("write %d of the failed batch: %v; want ErrWriterFailed and the missing directory", i, err)
		}
	}
	if err := w.Close(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Close: %v, want the failure", err)
	}
	if names := must(k.RemoteNames())(t); fmt.Sprint(names) != "[n0]" {
		t.Errorf("remotes on disk %v, want only the first batch's [n0]", names)
	}
	for _, d := range k.dirs() {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue // the removed directory
		}
		for _, e := range ents {
			if isTemp(e.Name()) {
				t.Errorf("temporary file left: %s", filepath.Join(d, e.Name()))
			}
		}
	}
}

// TestWriterQueueFull: a write that finds the queue full fails at once,
// and takes no sequence number.
func TestWriterQueueFull(t *testing.T) {
	defer goleak.VerifyNone(t)
	k := openKeep(t, AutoNever)
	cs, entered, release := firstSyncHeld()
	w := k.StartWriter(&WriterConfig{Queue: 2, sync: cs})
	must(w.SaveRemote(remoteN(1)))(t)
	<-entered
	must(w.SaveRemote(remoteN(2)))(t)
	must(w.SaveRemote(remoteN(3)))(t)
	if _, err := w.SaveRemote(remoteN(4)); !errors.Is(err, ErrQueueFull) {
		t.Errorf("write to a full queue: %v, want ErrQueueFull", err)
	}
	close(release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = k.StartWriter(nil)
	if q := must(w.Barrier())(t); q.Seq() != 1 {
		t.Errorf("a new writer's first seq is %d", q.Seq())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriterReadOnly: a Writer of a read-only keep refuses every write.
func TestWriterReadOnly(t *testing.T) {
	defer goleak.VerifyNone(t)
	ro := must(OpenReadOnly(openKeep(t, AutoNever).Dir()))(t)
	w := ro.StartWriter(nil)
	defer w.Close()
	if _, err := w.SaveRemote(remoteN(1)); !errors.Is(err, ErrReadOnly) {
		t.Errorf("save: %v, want ErrReadOnly", err)
	}
	if _, err := w.DeleteRemote("n1"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("delete: %v, want ErrReadOnly", err)
	}
}

func assertNoTemps(t *testing.T, k *Keep) {
	t.Helper()
	for _, d := range k.dirs() {
		ents := must(os.ReadDir(d))(t)
		for _, e := range ents {
			if isTemp(e.Name()) {
				t.Errorf("temporary file left: %s", filepath.Join(d, e.Name()))
			}
		}
	}
}

// crashChildEnv names the keep directory a child of TestWriterOrderAcrossKill
// writes to.
const crashChildEnv = "RAET_KEEP_WRITER_CRASH_CHILD"

// TestMain runs the child of TestWriterOrderAcrossKill when asked to.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	os.Exit(m.Run())
}

// crashChild writes the sequence, write i being remoteN(i) or roleN(i)
// (every third), until it is killed, and prints "durable <seq>" after each
// batch.
func crashChild(dir string) int {
	k, err := Open(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	w := k.StartWriter(&WriterConfig{Queue: 64, MaxBatch: 32, OnDurable: func(seq uint64) {
		mu.Lock()
		fmt.Fprintln(out, "durable", seq)
		out.Flush()
		mu.Unlock()
	}})
	var last *Queued
	for i := 1; i < 1<<30; i++ {
		for {
			var q *Queued
			if i%3 == 0 {
				q, err = w.SaveRemoteRole(roleN(i))
			} else {
				q, err = w.SaveRemote(remoteN(i))
			}
			if errors.Is(err, ErrQueueFull) {
				<-last.Done()
				continue
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			last = q
			break
		}
	}
	return 0
}

// TestWriterOrderAcrossKill kills a process while its Writer writes a
// sequence, reopens the keep and checks that it holds exactly the outcome
// of a prefix of the sequence, at least as long as the writes reported
// durable, with every file whole.
func TestWriterOrderAcrossKill(t *testing.T) {
	for run := range 3 {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		stdout := must(cmd.StdoutPipe())(t)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill at a random moment once the child writes: between batches or
		// in the middle of one.
		var durable atomic.Uint64
		first, lines := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				seq, err := strconv.ParseUint(strings.TrimPrefix(sc.Text(), "durable "), 10, 64)
				if err != nil {
					t.Errorf("child said %q", sc.Text())
					return
				}
				if durable.Swap(seq) == 0 {
					close(first)
				}
			}
		}()
		select {
		case <-first:
		case <-lines:
			t.Fatal("the child wrote nothing")
		}
		time.Sleep(time.Duration(rand.IntN(20_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-lines
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child ended with %v before it was killed", err)
		}
		k := must(Open(dir, nil))(t) // removes the temporary files
		prefix := checkPrefix(t, k)
		t.Logf("run %d: killed after %d durable, the keep holds the first %d writes", run, durable.Load(), prefix)
		if prefix < int(durable.Load()) {
			t.Errorf("the keep holds %d writes, but %d were durable", prefix, durable.Load())
		}
	}
}

// checkPrefix loads every file (none may be corrupt) and returns the k for
// which the keep is the outcome of writes 1..k, failing if there is none.
func checkPrefix(t *testing.T, k *Keep) int {
	t.Helper()
	remotes, err := k.LoadRemotes()
	if err != nil {
		t.Fatalf("a remote file is not whole: %v", err)
	}
	roles, err := k.LoadRemoteRoles()
	if err != nil {
		t.Fatalf("a role file is not whole: %v", err)
	}
	got := map[string]int{}
	prefix := 0
	for _, e := range remotes {
		got["estate "+e.Name] = int(e.SID)
		prefix = max(prefix, int(e.SID))
	}
	for _, r := range roles {
		i := int(binary.BigEndian.Uint64(r.Verify[:]))
		got["role "+r.Role] = i
		prefix = max(prefix, i)
	}
	want := map[string]int{}
	for i := 1; i <= prefix; i++ {
		if i%3 == 0 {
			want["role "+roleN(i).Role] = i
		} else {
			want["estate "+remoteN(i).Name] = i
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the keep holds %v; the first %d writes leave %v", got, prefix, want)
	}
	return prefix
}

// BenchmarkJoinWrites writes what a main estate's keep gets for each join
// and the allow after it (the remote's role file and its estate file, once
// each: the estate keeps the allow's session), through
// Keep's synchronous saves (two fsyncs each) and through a Writer (with a
// sync per file, and with the default syncer). One iteration is one join:
//
//	go test -run '^$' -bench JoinWrites -benchtime 2000x ./keep
func BenchmarkJoinWrites(b *testing.B) {
	b.Run("save", func(b *testing.B) {
		k := openKeep(b, AutoNever)
		for i := 0; b.Loop(); i++ {
			e, r := joinRecords(i)
			if err := k.SaveRemoteRole(r); err != nil {
				b.Fatal(err)
			}
			if err := k.SaveRemote(e); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(2*2, "syncs/join")
	})
	for _, v := range []struct {
		name string
		s    syncer
	}{{"writer-fsync", fileSyncer{}}, {"writer", defaultSyncer()}} {
		b.Run(v.name, func(b *testing.B) {
			k := openKeep(b, AutoNever)
			cs := &countSyncer{inner: v.s}
			w := k.StartWriter(&WriterConfig{sync: cs})
			var last *Queued
			put := func(save func() (*Queued, error)) {
				for {
					q, err := save()
					if errors.Is(err, ErrQueueFull) {
						<-last.Done()
						continue
					}
					if err != nil {
						b.Fatal(err)
					}
					last = q
					return
				}
			}
			joins := 0
			for i := 0; b.Loop(); i++ {
				e, r := joinRecords(i)
				put(func() (*Queued, error) { return w.SaveRemoteRole(r) })
				put(func() (*Queued, error) { return w.SaveRemote(e) })
				joins++
			}
			if err := errors.Join(last.Wait(context.Background()), w.Close()); err != nil {
				b.Fatal(err)
			}
			syncs := cs.datas.Load() + cs.dirs.Load()
			if _, perFile := v.s.(fileSyncer); perFile {
				syncs = cs.files.Load() + cs.dirs.Load()
			}
			b.ReportMetric(float64(syncs)/float64(joins), "syncs/join")
		})
	}
}

// joinRecords are the records of the i-th join, each time another remote.
func joinRecords(i int) (RemoteEstate, RemoteRole) {
	e := remoteN(i)
	e.Name, e.Role = fmt.Sprintf("c%d", i), fmt.Sprintf("c%d", i)
	r := roleN(i)
	r.Role = e.Role
	return e, r
}
