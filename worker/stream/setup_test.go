package stream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/paysync/paysync/internal/natstest"
)

// TestSource_StartRefusedStaysUp: a set-up the server refuses at Start
// (Bind before the stream or the consumer exists, the dead-letter subject
// captured by the source stream, an account at its stream limit, JetStream
// off) is not Start's error: the source stays up, not ready, says why in
// Status, logs the refusal once however often it retries, and consumes as
// soon as the operator has fixed the server.
func TestSource_StartRefusedStaysUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	createStream := func(t *testing.T, e *env, subjects ...string) {
		t.Helper()
		if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: subjects}); err != nil {
			t.Fatal(err)
		}
	}
	createConsumer := func(t *testing.T, e *env) {
		t.Helper()
		if _, err := e.js.CreateConsumer(ctx, "TIMESHEETS", jetstream.ConsumerConfig{Durable: "paysync", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	streamLimit := func(n int) map[string]server.JetStreamAccountLimits {
		return map[string]server.JetStreamAccountLimits{"": {MaxMemory: -1, MaxStore: -1, MaxStreams: n, MaxConsumers: -1}}
	}
	for _, tt := range []struct {
		name    string
		noJS    bool
		prepare func(t *testing.T, e *env, cfg *Config)
		want    string // in Status's reason and the log
		fix     func(t *testing.T, e *env)
	}{
		{
			name:    "bind without the stream",
			prepare: func(t *testing.T, e *env, cfg *Config) { cfg.Bind = true },
			want:    `stream "TIMESHEETS" does not exist`,
			fix: func(t *testing.T, e *env) {
				if _, err := e.js.Stream(ctx, "TIMESHEETS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
					t.Errorf("bind created the stream: %v", err)
				}
				createStream(t, e, "timesheets.>")
				createConsumer(t, e)
			},
		},
		{
			name: "bind without the consumer",
			prepare: func(t *testing.T, e *env, cfg *Config) {
				cfg.Bind = true
				createStream(t, e, "timesheets.>")
			},
			want: `consumer "paysync" of stream "TIMESHEETS" does not exist`,
			fix:  createConsumer,
		},
		{
			name:    "dead-letter subject captured by the source stream",
			prepare: func(t *testing.T, e *env, cfg *Config) { createStream(t, e, "timesheets.>", "paysync.>") },
			want:    `dead-letter subject "paysync.deadletter" is captured by stream "TIMESHEETS"`,
			fix: func(t *testing.T, e *env) {
				if _, err := e.js.UpdateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"}}); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "account at its stream limit: no room for the dead-letter stream",
			prepare: func(t *testing.T, e *env, cfg *Config) {
				if err := e.ns.GlobalAccount().UpdateJetStreamLimits(streamLimit(1)); err != nil {
					t.Fatal(err)
				}
			},
			want: "maximum number of streams reached",
			fix: func(t *testing.T, e *env) {
				if err := e.ns.GlobalAccount().UpdateJetStreamLimits(streamLimit(-1)); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "JetStream off",
			noJS: true,
			want: "jetstream not enabled",
			fix: func(t *testing.T, e *env) {
				port := natstest.Port(t, e.ns)
				e.ns.Shutdown()
				e.ns.WaitForShutdown()
				e.ns = natstest.Start(t, natstest.WithStoreDir(e.dir), natstest.WithPort(port))
				waitFor(t, 20*time.Second, "the test client to reconnect", e.nc.IsConnected)
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := []natstest.Option{natstest.WithStoreDir(dir)}
			if tt.noJS {
				opts = append(opts, natstest.WithoutJetStream())
			}
			e := envFor(t, dir, natstest.Start(t, opts...), "")
			cfg := e.config()
			var logs *logCapture
			cfg.Logger, logs = captureLogger(t)
			cfg.setupRetryWait = 20 * time.Millisecond
			if tt.prepare != nil {
				tt.prepare(t, e, &cfg)
			}
			sink := newSink()
			s, err := New(cfg, sink)
			if err != nil {
				t.Fatal(err)
			}
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := s.Start(sctx); err != nil {
				t.Fatalf("Start: %v (a refusal must not stop the daemon)", err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := s.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			})

			var reason string
			if !eventually(20*time.Second, func() bool {
				_, reason = s.Status()
				return strings.HasPrefix(reason, "stream set-up refused: ") && strings.Contains(reason, tt.want) && strings.HasSuffix(reason, ", retrying")
			}) {
				t.Fatalf("Status() reason %q, want the refusal (%s)", reason, tt.want)
			}
			// Retried, and still one line.
			tried := s.setupAttempts.Load()
			waitFor(t, 20*time.Second, "more set-up attempts", func() bool { return s.setupAttempts.Load() >= tried+3 })
			if s.Connected() {
				t.Error("Connected() while the set-up is refused")
			}
			// (The text handler quotes the error: its quotes are escaped.)
			if n := logs.count("level=ERROR", "stream set-up refused", strings.ReplaceAll(tt.want, `"`, `\"`)); n != 1 {
				t.Errorf("%d lines logging the refusal after %d attempts, want 1:\n%s", n, s.setupAttempts.Load(), logs.all())
			}

			tt.fix(t, e)
			waitFor(t, 30*time.Second, "consuming once the server is fixed", s.Connected)
			e.publish("timesheets.MV8x.toggl", "t-1", `{"id":"t-1"}`)
			waitFor(t, 10*time.Second, "the commit", func() bool { return sink.numCommitted() == 1 })
			if n := logs.count("level=INFO", "consuming"); n != 1 {
				t.Errorf("%d 'consuming' lines, want 1", n)
			}
		})
	}
}

// denyStreamNames starts a server on which the user paysync (password pw)
// may not ask which stream captures a subject ($JS.API.STREAM.NAMES: the
// request goes unanswered, as on a busy server) and admin may do anything;
// the env's client is admin's, and its config paysync's. allow lifts the
// restriction.
func denyStreamNames(t *testing.T) (e *env, cfg Config, allow func()) {
	t.Helper()
	users := func(deny ...string) []*server.User {
		return []*server.User{
			{Username: "paysync", Password: "pw", Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: deny}}},
			{Username: "admin", Password: "pw"},
		}
	}
	dir := t.TempDir()
	var opts *server.Options // as the server runs with them, for the reload
	ns := natstest.Start(t, natstest.WithStoreDir(dir), natstest.WithOptions(func(o *server.Options) {
		o.Users = users("$JS.API.STREAM.NAMES")
		opts = o
	}))
	e = envFor(t, dir, ns, "admin:pw")
	cfg = e.config()
	cfg.URL = strings.Replace(ns.ClientURL(), "nats://", "nats://paysync:pw@", 1)
	return e, cfg, func() {
		o := opts.Clone()
		o.Users = users()
		if err := ns.ReloadOptions(o); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSource_DeadLetterLookupFails: when the server does not answer which
// stream captures the dead-letter subject (a timeout on a busy server),
// dead letters still go into a stream, not out as plain NATS messages for
// the rest of the run.
func TestSource_DeadLetterLookupFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Paysync creates the dead-letter stream when none captures the
	// subject: it cannot know that without the answer, so the lookup is
	// part of the set-up and retried until answered.
	t.Run("the lookup is retried as part of the set-up", func(t *testing.T) {
		t.Parallel()
		e, cfg, allow := denyStreamNames(t)
		cfg.setupRetryWait = 20 * time.Millisecond
		sink := newSink()
		sink.invalid = map[string]string{"bad-1": "employee 42 unknown"}
		s := e.start(cfg, sink)
		var reason string
		if !eventually(20*time.Second, func() bool {
			_, reason = s.Status()
			return strings.Contains(reason, "stream set-up failing: ") && strings.Contains(reason, "dead-letter subject")
		}) {
			t.Errorf("Status() reason %q while the lookup goes unanswered", reason)
		}

		allow()
		waitFor(t, 30*time.Second, "consuming once the lookup is answered", s.Connected)
		e.publish("timesheets.MV8x.toggl", "bad-1", `{"id":"bad-1"}`)
		waitFor(t, 10*time.Second, "the dead letter to be handled", func() bool {
			ci := e.consumerInfo("TIMESHEETS", "paysync")
			return len(sink.callsFor("bad-1")) >= 1 && ci.NumPending == 0 && ci.NumAckPending == 0
		})
		st, err := e.js.Stream(ctx, "TIMESHEETS_DEADLETTER")
		if err != nil {
			t.Fatalf("the dead letter was not kept: %v", err)
		}
		if n := st.CachedInfo().State.Msgs; n != 1 {
			t.Errorf("the dead-letter stream holds %d messages, want 1", n)
		}
	})

	// Bound, paysync creates nothing: it publishes dead letters through
	// JetStream, so that a stream that captures the subject keeps them
	// (confirmed), and so a transient failure at a finite MaxDeliver's last
	// delivery is kept too rather than left unconsumed.
	t.Run("bound: dead letters go through JetStream", func(t *testing.T) {
		t.Parallel()
		e, cfg, _ := denyStreamNames(t)
		if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.js.CreateConsumer(ctx, "TIMESHEETS", jetstream.ConsumerConfig{Durable: "paysync", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second, MaxDeliver: 2}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"paysync.deadletter"}}); err != nil {
			t.Fatal(err)
		}
		cfg.Bind, cfg.NakDelay = true, 50*time.Millisecond
		var obs outcomes
		cfg.Observe = obs.observe
		sink := newSink()
		sink.invalid = map[string]string{"bad-1": "employee 42 unknown"}
		sink.failFirst = 2 // outage-1 fails at both deliveries
		e.start(cfg, sink)

		e.publish("timesheets.MV8x.toggl", "bad-1", `{"id":"bad-1"}`)
		e.publish("timesheets.MV8x.toggl", "outage-1", `{"id":"outage-1"}`)
		if !eventually(20*time.Second, func() bool { return len(e.deadLetters("DLQ")) == 2 }) {
			t.Fatalf("%d dead letters kept in DLQ, want 2 (outcomes %v)", len(e.deadLetters("DLQ")), obs.n)
		}
		got := map[string]string{}
		for _, m := range e.deadLetters("DLQ") {
			got[m.Header.Get(HeaderOriginalMsgID)] = m.Header.Get(HeaderReason)
		}
		if got["bad-1"] != "employee 42 unknown" || !strings.Contains(got["outage-1"], "transient failure") {
			t.Errorf("dead letters %v", got)
		}
		waitFor(t, 10*time.Second, "the consumer to be caught up", func() bool {
			ci := e.consumerInfo("TIMESHEETS", "paysync")
			return ci.NumPending == 0 && ci.NumAckPending == 0
		})
		// Observed just after the term that settled the consumer.
		if !eventually(10*time.Second, func() bool { return obs.get("invalid") == 1 && obs.get("dead-lettered") == 1 }) {
			t.Errorf("outcomes %v", obs.n)
		}
	})

	// Bound, and no stream captures the subject: the JetStream publish
	// finds no responder, and the dead letter goes out plainly, as when the
	// lookup says so (Start warned that such dead letters are lost).
	t.Run("bound, no dead-letter stream: published plainly", func(t *testing.T) {
		t.Parallel()
		e, cfg, _ := denyStreamNames(t)
		if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.js.CreateConsumer(ctx, "TIMESHEETS", jetstream.ConsumerConfig{Durable: "paysync", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		cfg.Bind = true
		var obs outcomes
		cfg.Observe = obs.observe
		sink := newSink()
		sink.invalid = map[string]string{"bad-1": "employee 42 unknown"}
		e.start(cfg, sink)
		e.publish("timesheets.MV8x.toggl", "bad-1", `{"id":"bad-1"}`)
		waitFor(t, 20*time.Second, "the dead letter to be handled", func() bool {
			ci := e.consumerInfo("TIMESHEETS", "paysync")
			return obs.get("invalid") == 1 && ci.NumPending == 0 && ci.NumAckPending == 0
		})
		if n := len(sink.callsFor("bad-1")); n != 1 {
			t.Errorf("bad-1 delivered %d times", n)
		}
	})
}

// TestSetupBackoff: set-up retries double from 250 ms, up to 5 s while the
// server is not ready and up to a minute while it refuses.
func TestSetupBackoff(t *testing.T) {
	notReady := errors.New("stream: stream TIMESHEETS: context deadline exceeded")
	refused := refusal("stream: bind: stream %q does not exist", "TIMESHEETS")
	for _, tt := range []struct {
		name string
		wait time.Duration
		err  error
		want time.Duration
	}{
		{"first", 0, nil, 250 * time.Millisecond},
		{"not ready: doubles", time.Second, notReady, 2 * time.Second},
		{"not ready: capped", 4 * time.Second, notReady, 5 * time.Second},
		{"refused: doubles past the not-ready cap", 8 * time.Second, refused, 16 * time.Second},
		{"refused: capped at a minute", 40 * time.Second, refused, time.Minute},
		{"not ready after a refusal: back under its cap", time.Minute, notReady, 5 * time.Second},
		{"an API refusal", 32 * time.Second, &jetstream.APIError{Code: 400, ErrorCode: 10027, Description: "maximum number of streams reached"}, time.Minute},
	} {
		if got := setupBackoff(tt.wait, tt.err); got != tt.want {
			t.Errorf("%s: setupBackoff(%v, %v) = %v, want %v", tt.name, tt.wait, tt.err, got, tt.want)
		}
	}
}
