package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/paysync/paysync"
)

func TestProbe(t *testing.T) {
	type want struct {
		level  paysync.CheckLevel
		err    error  // errors.Is, nil for none
		detail string // in Detail
	}
	tests := []struct {
		name                 string
		setup                func(t *testing.T, e *env, cfg *Config)
		conn, stream, consum want
	}{
		{"nothing created yet", nil,
			want{paysync.CheckOK, nil, "connected to"},
			want{paysync.CheckWarn, ErrStreamMissing, "stream TIMESHEETS does not exist yet"},
			want{paysync.CheckWarn, ErrConsumerMissing, "consumer paysync does not exist yet"}},
		{"bound without the stream", func(t *testing.T, e *env, cfg *Config) { cfg.Bind = true },
			want{paysync.CheckOK, nil, ""},
			want{paysync.CheckFail, ErrStreamMissing, "does not exist"},
			want{paysync.CheckSkipped, nil, "the stream does not exist"}},
		{"bound without the consumer or a dead-letter stream", func(t *testing.T, e *env, cfg *Config) {
			cfg.Bind = true
			mustCreate(t, e, StreamConfig(*cfg))
		},
			want{paysync.CheckOK, nil, ""},
			want{paysync.CheckWarn, ErrNoDeadLetterStream, "dead letters would be lost"},
			want{paysync.CheckFail, ErrConsumerMissing, "does not exist"}},
		{"the stream captures the dead-letter subject", func(t *testing.T, e *env, cfg *Config) {
			sc := StreamConfig(*cfg)
			sc.Subjects = []string{"timesheets.>", "paysync.>"}
			mustCreate(t, e, sc)
		},
			want{paysync.CheckOK, nil, ""},
			want{paysync.CheckFail, ErrDeadLetterCaptured, "captures the dead-letter subject paysync.deadletter"},
			want{paysync.CheckWarn, ErrConsumerMissing, ""}},
		{"bound consumer with a finite MaxDeliver", func(t *testing.T, e *env, cfg *Config) {
			cfg.Bind = true
			mustCreate(t, e, StreamConfig(*cfg))
			mustCreate(t, e, DeadLetterStreamConfig(*cfg))
			mustConsumer(t, e, jetstream.ConsumerConfig{Durable: "paysync", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 5})
		},
			want{paysync.CheckOK, nil, ""},
			want{paysync.CheckOK, nil, "dead letters kept in stream TIMESHEETS_DEADLETTER"},
			want{paysync.CheckWarn, ErrFiniteMaxDeliver, "max deliver 5"}},
		{"consumer without explicit acks", func(t *testing.T, e *env, cfg *Config) {
			sc := StreamConfig(*cfg)
			sc.Retention = jetstream.LimitsPolicy // a work queue refuses such a consumer
			mustCreate(t, e, sc)
			mustConsumer(t, e, jetstream.ConsumerConfig{Durable: "paysync", AckPolicy: jetstream.AckNonePolicy})
		},
			want{paysync.CheckOK, nil, ""},
			want{paysync.CheckOK, nil, "is created at start"},
			want{paysync.CheckFail, ErrNotExplicitAck, "paysync needs explicit acks"}},
		{"invalid configuration", func(t *testing.T, e *env, cfg *Config) { cfg.DeadLetter = "timesheets.dead" },
			want{paysync.CheckFail, ErrInvalidConfig, "captured by the stream subject"},
			want{paysync.CheckSkipped, nil, "invalid"},
			want{paysync.CheckSkipped, nil, "invalid"}},
		{"no server", func(t *testing.T, e *env, cfg *Config) {
			cfg.URL = fmt.Sprintf("nats://u:secret@127.0.0.1:%d", freePort(t))
		},
			want{paysync.CheckFail, ErrNotConnected, "not connected within"},
			want{paysync.CheckSkipped, nil, "not connected"},
			want{paysync.CheckSkipped, nil, "not connected"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config()
			if tt.setup != nil {
				tt.setup(t, e, &cfg)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			res := Probe(ctx, cfg)
			for _, c := range []struct {
				part string
				got  paysync.Check
				want want
			}{{"conn", res.Conn, tt.conn}, {"stream", res.Stream, tt.stream}, {"consumer", res.Consumer, tt.consum}} {
				if c.got.Level != c.want.level || !strings.Contains(c.got.Detail, c.want.detail) ||
					(c.want.err != nil && !errors.Is(c.got.Err, c.want.err)) {
					t.Errorf("%s: got %v %q (err %v), want %v with %q (err %v)", c.part, c.got.Level, c.got.Detail, c.got.Err, c.want.level, c.want.detail, c.want.err)
				}
				if strings.Contains(c.got.Detail, "secret") || strings.Contains(c.got.Detail, "NATS_") || strings.Contains(c.got.Detail, "PAYSYNC_") {
					t.Errorf("%s: detail leaks a secret or names a variable: %q", c.part, c.got.Detail)
				}
			}
		})
	}
}

// What a started Source set up is what Probe expects: all OK.
func TestProbe_AfterStart(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	src := e.start(cfg, newSink())
	waitFor(t, 20*time.Second, "the source consuming", func() bool { ok, _ := src.Status(); return ok })
	res := Probe(context.Background(), cfg)
	for _, c := range []paysync.Check{res.Conn, res.Stream, res.Consumer} {
		if c.Level != paysync.CheckOK {
			t.Errorf("got %v %q (err %v), want ok", c.Level, c.Detail, c.Err)
		}
	}
	if !strings.Contains(res.Stream.Detail, "dead letters kept in stream TIMESHEETS_DEADLETTER") {
		t.Errorf("stream: %q", res.Stream.Detail)
	}
	info, err := e.js.Stream(context.Background(), "TIMESHEETS")
	if err != nil {
		t.Fatal(err)
	}
	want := StreamConfig(cfg)
	got := info.CachedInfo().Config
	if got.Retention != want.Retention || got.Storage != want.Storage || got.Duplicates != want.Duplicates || strings.Join(got.Subjects, " ") != strings.Join(want.Subjects, " ") {
		t.Errorf("created stream %+v, StreamConfig %+v", got, want)
	}
}

func mustCreate(t *testing.T, e *env, sc jetstream.StreamConfig) {
	t.Helper()
	if _, err := e.js.CreateStream(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
}

func mustConsumer(t *testing.T, e *env, cc jetstream.ConsumerConfig) {
	t.Helper()
	if _, err := e.js.CreateOrUpdateConsumer(context.Background(), DefaultStream, cc); err != nil {
		t.Fatal(err)
	}
}
