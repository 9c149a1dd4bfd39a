package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/paysync/paysync/internal/natstest"
)

// env is one embedded server and a plain client for publishing and
// inspecting.
type env struct {
	t   *testing.T
	dir string
	ns  *server.Server
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	return envFor(t, dir, natstest.Start(t, natstest.WithStoreDir(dir)), "")
}

// envFor is an env on ns (storing in dir); userinfo ("user:password"),
// if set, is the test client's and the Config's.
func envFor(t *testing.T, dir string, ns *server.Server, userinfo string) *env {
	t.Helper()
	url := ns.ClientURL()
	if userinfo != "" {
		url = strings.Replace(url, "nats://", "nats://"+userinfo+"@", 1)
	}
	nc, js := natstest.Connect(t, url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	return &env{t: t, dir: dir, ns: ns, url: url, nc: nc, js: js}
}

// config returns a Config for this server with quick test settings.
func (e *env) config() Config {
	return Config{URL: e.url, Logger: testLogger(e.t), NakDelay: 200 * time.Millisecond}
}

// start starts a Source and closes it at the end of the test.
func (e *env) start(cfg Config, sink Sink) *Source {
	e.t.Helper()
	s, err := New(cfg, sink)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			e.t.Errorf("close: %v", err)
		}
	})
	return s
}

// publish publishes data with a Nats-Msg-Id and reports whether the
// stream dropped it as a duplicate.
func (e *env) publish(subject, id, data string) bool {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := e.js.Publish(ctx, subject, []byte(data), jetstream.WithMsgID(id))
	if err != nil {
		e.t.Fatalf("publish %s: %v", id, err)
	}
	return ack.Duplicate
}

func (e *env) consumerInfo(stream, durable string) *jetstream.ConsumerInfo {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, stream, durable)
	if err != nil {
		e.t.Fatalf("consumer %s/%s: %v", stream, durable, err)
	}
	return c.CachedInfo()
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventually polls cond until it holds (true) or the timeout passes (false).
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// testLogger logs through t.Log (shown with -v or on failure), and stops
// when the test ends so that late goroutines cannot log into a finished test.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) }) // registered first: runs last
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// logCapture is a logger that logs through t.Log and keeps the lines, so
// a test can count them.
type logCapture struct {
	testWriter
	mu    sync.Mutex
	lines []string
}

func captureLogger(t *testing.T) (*slog.Logger, *logCapture) {
	c := &logCapture{testWriter: testWriter{t: t}}
	t.Cleanup(func() { c.done.Store(true) })
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug})), c
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.lines = append(c.lines, strings.TrimSuffix(string(p), "\n"))
	c.mu.Unlock()
	return c.testWriter.Write(p)
}

// count returns how many lines contain every one of parts.
func (c *logCapture) count(parts ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			n++
		}
	}
	return n
}

func (c *logCapture) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// freePort returns a loopback port nothing listens on (for a server that
// is started later).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// deadLetters returns the messages of the dead-letter stream, oldest first.
func (e *env) deadLetters(name string) []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := e.js.Stream(ctx, name)
	if err != nil {
		e.t.Fatalf("dead-letter stream %s: %v", name, err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			e.t.Fatalf("dead-letter stream %s: %v", name, err)
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
}

var errTransient = errors.New("ledger busy")

// call is one Commit the sink saw.
type call struct {
	Message
	At time.Time
}

// testSink records every Commit. It commits each key (MsgID, else stream
// sequence) once and reports later commits of it as Duplicate, like the
// ledger. It can fail transiently, refuse keys as invalid, or be slow.
type testSink struct {
	mu        sync.Mutex
	calls     []call
	committed map[string]int // first-time commits by key
	dups      int

	failFirst  uint64            // transient error while Delivered <= failFirst
	alwaysFail bool              // transient error always
	invalid    map[string]string // key → reason
	delay      time.Duration     // each Commit takes this long
	started    chan Message      // if set, told of each Commit (never blocks)
}

func newSink() *testSink { return &testSink{committed: map[string]int{}} }

func key(m Message) string {
	if m.MsgID != "" {
		return m.MsgID
	}
	return "seq:" + strconv.FormatUint(m.StreamSeq, 10)
}

func (s *testSink) Commit(ctx context.Context, m Message) (Outcome, error) {
	s.mu.Lock()
	s.calls = append(s.calls, call{Message: m, At: time.Now()})
	// A re-driven message ("<id>|redrive:...") is the same entry.
	base, _, _ := strings.Cut(key(m), "|redrive:")
	reason, invalid := s.invalid[base]
	fail := s.alwaysFail || m.Delivered <= s.failFirst
	delay, started := s.delay, s.started
	s.mu.Unlock()

	if started != nil {
		select {
		case started <- m:
		default:
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if invalid {
		return 0, fmt.Errorf("map entry: %w", &Invalid{Reason: reason})
	}
	if fail {
		return 0, errTransient
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(m)
	if s.committed[k] > 0 {
		s.dups++
		return Duplicate, nil
	}
	s.committed[k]++
	return Committed, nil
}

func (s *testSink) numCommitted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.committed)
}

func (s *testSink) callsFor(k string) []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []call
	for _, c := range s.calls {
		if key(c.Message) == k {
			out = append(out, c)
		}
	}
	return out
}

func (s *testSink) allCalls() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

// outcomes counts Observe calls.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) observe(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[outcome]++
}

func (o *outcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}
