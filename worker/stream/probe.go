package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/paysync/paysync"
)

// ProbeWait bounds how long Probe waits for a connection (less when ctx
// ends sooner).
const ProbeWait = 5 * time.Second

// Causes Probe reports, for the caller's hint (Check.Err wraps one).
var (
	ErrInvalidConfig      = errors.New("invalid configuration")
	ErrConnect            = errors.New("cannot connect")
	ErrNotConnected       = errors.New("not connected")
	ErrNoJetStream        = errors.New("JetStream is not enabled")
	ErrStreamMissing      = errors.New("stream does not exist")
	ErrConsumerMissing    = errors.New("consumer does not exist")
	ErrDeadLetterCaptured = errors.New("the dead-letter subject is captured by the source stream")
	ErrNoDeadLetterStream = errors.New("no stream keeps dead letters")
	ErrNotExplicitAck     = errors.New("consumer does not use explicit acks")
	ErrFiniteMaxDeliver   = errors.New("consumer has a finite MaxDeliver")
)

// StreamConfig is the stream Start creates when cfg.Stream does not exist
// (file storage, work-queue retention: an acknowledged message is removed;
// a duplicate window for Nats-Msg-Id). The one place it is written.
func StreamConfig(cfg Config) jetstream.StreamConfig {
	c := cfg.withDefaults()
	return jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "timesheet entries for paysync",
		Subjects:    c.Subjects,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  duplicateWindow,
	}
}

// DeadLetterStreamConfig is the stream Start creates for dead letters when
// no stream captures cfg.DeadLetter.
func DeadLetterStreamConfig(cfg Config) jetstream.StreamConfig {
	return deadLetterStreamConfig(cfg.withDefaults())
}

// ProbeResult is what Probe found: the connection, the stream (with the
// dead-letter stream) and the consumer. A part that could not be looked at
// is CheckSkipped, saying why.
type ProbeResult struct {
	Conn, Stream, Consumer paysync.Check
	Config                 Config // cfg with its defaults, as probed
}

// Probe checks, without creating or changing anything, what Start would
// use: cfg is valid, the server is reachable and has JetStream, the stream
// exists (or will be created: a warning), the dead-letter subject is kept
// by a stream other than the source stream, and the durable consumer uses
// explicit acks and, where Start would not set it, an unlimited
// MaxDeliver. It is for pre-flight checks (paysync doctor); a running
// Source reports through Status.
func Probe(ctx context.Context, cfg Config) ProbeResult {
	c := cfg.withDefaults()
	res := ProbeResult{Config: c}
	skip := func(from int, why string) ProbeResult {
		parts := []*paysync.Check{&res.Conn, &res.Stream, &res.Consumer}
		for _, p := range parts[from:] {
			*p = paysync.Checked(paysync.CheckSkipped, nil, why)
		}
		return res
	}
	fail := func(err error, format string, a ...any) paysync.Check {
		return paysync.Checked(paysync.CheckFail, err, fmt.Sprintf(format, a...))
	}
	warn := func(err error, format string, a ...any) paysync.Check {
		return paysync.Checked(paysync.CheckWarn, err, fmt.Sprintf(format, a...))
	}

	if err := c.validate(); err != nil {
		res.Conn = fail(fmt.Errorf("%w: %w", ErrInvalidConfig, err), "%v", err)
		return skip(1, "the NATS settings are invalid")
	}
	nc, err := connect(c)
	if err != nil {
		res.Conn = fail(fmt.Errorf("%w: %w", ErrConnect, err), "%v", err)
		return skip(1, "not connected")
	}
	defer nc.Close()
	wait := ProbeWait
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = max(time.Until(dl).Round(time.Millisecond), 0)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	waitConnected(wctx, nc)
	cancel()
	if !nc.IsConnected() {
		detail := fmt.Sprintf("%s: not connected within %s", redactURLs(c.URL), wait)
		if err := nc.LastError(); err != nil {
			detail += ": " + redactURLs(err.Error())
		}
		res.Conn = fail(ErrNotConnected, "%s", detail)
		return skip(1, "not connected")
	}
	res.Conn = paysync.Checked(paysync.CheckOK, nil, fmt.Sprintf("connected to %s (server %s)", redactURLs(nc.ConnectedUrlRedacted()), nc.ConnectedServerVersion()))

	cctx, cancel := context.WithTimeout(ctx, ProbeWait)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		res.Stream = fail(err, "%v", err)
		return skip(2, "no JetStream")
	}
	st, err := js.Stream(cctx, c.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && c.Bind:
		res.Stream = fail(ErrStreamMissing, "stream %s does not exist, and a bound source (Config.Bind) does not create it", c.Stream)
		return skip(2, "the stream does not exist")
	case errors.Is(err, jetstream.ErrStreamNotFound):
		res.Stream = warn(ErrStreamMissing, "stream %s does not exist yet", c.Stream)
		res.Consumer = warn(ErrConsumerMissing, "consumer %s does not exist yet", c.Durable)
		return res
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		res.Stream = fail(fmt.Errorf("%w: %w", ErrNoJetStream, err), "JetStream is not enabled: %v", err)
		return skip(2, "no JetStream")
	case err != nil:
		res.Stream = fail(err, "stream %s: %v", c.Stream, err)
		return skip(2, "the stream could not be read")
	}
	res.Stream = probeDeadLetters(cctx, js, c, st.CachedInfo())
	res.Consumer = probeConsumer(cctx, js, c)
	return res
}

// probeDeadLetters describes the stream and says where dead letters go.
func probeDeadLetters(ctx context.Context, js jetstream.JetStream, c Config, info *jetstream.StreamInfo) paysync.Check {
	detail := fmt.Sprintf("%s: subjects %s, %d message(s), %s retention, %s storage", c.Stream, strings.Join(info.Config.Subjects, " "),
		info.State.Msgs, info.Config.Retention, info.Config.Storage)
	owner, err := js.StreamNameBySubject(ctx, c.DeadLetter)
	switch {
	case err == nil && owner == c.Stream:
		return paysync.Checked(paysync.CheckFail, ErrDeadLetterCaptured,
			detail+fmt.Sprintf("; it captures the dead-letter subject %s: dead letters would be consumed again", c.DeadLetter))
	case err == nil:
		detail += fmt.Sprintf("; dead letters kept in stream %s", owner)
	case errors.Is(err, jetstream.ErrStreamNotFound) && c.Bind:
		return paysync.Checked(paysync.CheckWarn, ErrNoDeadLetterStream,
			detail+fmt.Sprintf("; no stream captures the dead-letter subject %s, and a bound source does not create one: dead letters would be lost", c.DeadLetter))
	case errors.Is(err, jetstream.ErrStreamNotFound):
		detail += fmt.Sprintf("; dead letters: stream %s is created at start", c.DeadLetterStream)
	}
	return paysync.Checked(paysync.CheckOK, nil, detail)
}

// probeConsumer reads the durable consumer's settings and backlog.
func probeConsumer(ctx context.Context, js jetstream.JetStream, c Config) paysync.Check {
	cons, err := js.Consumer(ctx, c.Stream, c.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound) && c.Bind:
		return paysync.Checked(paysync.CheckFail, ErrConsumerMissing,
			fmt.Sprintf("consumer %s of stream %s does not exist, and a bound source (Config.Bind) does not create it", c.Durable, c.Stream))
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return paysync.Checked(paysync.CheckWarn, ErrConsumerMissing, fmt.Sprintf("consumer %s does not exist yet", c.Durable))
	case err != nil:
		return paysync.Checked(paysync.CheckFail, err, fmt.Sprintf("consumer %s: %v", c.Durable, err))
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return paysync.Checked(paysync.CheckFail, err, fmt.Sprintf("consumer %s: %v", c.Durable, err))
	}
	detail := fmt.Sprintf("%s: %d pending (%d not yet delivered, %d unacknowledged), ack wait %s", c.Durable,
		ci.NumPending+uint64(max(ci.NumAckPending, 0)), ci.NumPending, ci.NumAckPending, ci.Config.AckWait)
	if ci.Config.AckPolicy != jetstream.AckExplicitPolicy {
		return paysync.Checked(paysync.CheckFail, ErrNotExplicitAck,
			detail+fmt.Sprintf("; ack policy %v, paysync needs explicit acks", ci.Config.AckPolicy))
	}
	// Start sets MaxDeliver unless bound: only a bound consumer's (or a
	// configured finite one) stays.
	if md := ci.Config.MaxDeliver; md > 0 && (c.Bind || c.MaxDeliver > 0) {
		return paysync.Checked(paysync.CheckWarn, ErrFiniteMaxDeliver,
			detail+fmt.Sprintf("; max deliver %d: a payroll or ledger outage outlasting that many deliveries turns valid messages into dead letters", md))
	}
	return paysync.Checked(paysync.CheckOK, nil, detail)
}
