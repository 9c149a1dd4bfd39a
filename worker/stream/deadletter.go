package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DeadLetter is one message kept in the dead-letter stream.
type DeadLetter struct {
	Seq       uint64    `json:"seq"`                  // in the dead-letter stream: what RedriveOptions.Seq names
	Subject   string    `json:"subject"`              // the subject it was consumed from (Paysync-Original-Subject)
	StreamSeq uint64    `json:"stream_seq,omitempty"` // its sequence in the source stream
	MsgID     string    `json:"msg_id,omitempty"`     // its original Nats-Msg-Id
	Reason    string    `json:"reason"`
	Time      time.Time `json:"time"` // when it was dead-lettered
	Data      []byte    `json:"-"`
}

// RedriveOptions selects dead letters and says whether to re-drive them.
type RedriveOptions struct {
	// Seq, when set, selects only the dead letter with this sequence in
	// the dead-letter stream.
	Seq uint64
	// Subject, when set, selects dead letters whose original subject it
	// matches (wildcards allowed: "timesheets.MV8x.>").
	Subject string
	// List only lists the selected dead letters: nothing is re-driven.
	List bool
}

// RedriveResult is what Redrive found and did.
type RedriveResult struct {
	Stream   string       // the dead-letter stream
	Matched  []DeadLetter // the selected dead letters, in order
	Redriven []uint64     // sequences re-driven and removed from the dead-letter stream
	// Skipped are dead letters that cannot be re-driven (no original
	// subject, or the dead-letter subject itself), with why.
	Skipped []Skip
}

// Skip is a dead letter Redrive left where it is.
type Skip struct {
	Seq    uint64
	Reason string
}

const (
	redriveConnectTimeout = 5 * time.Second
	redriveCallTimeout    = 10 * time.Second // one get, publish or delete
)

// Redrive lists the dead letters kept in the stream that captures
// cfg.DeadLetter (opts selects which) and, unless opts.List, re-drives
// them, oldest first: each one's data is published again to its original
// subject, then removed from the dead-letter stream once the source stream
// has acknowledged it. A crash in between loses nothing: running it again
// publishes the same message again, which the source stream drops within
// its duplicate window (the re-drive's Nats-Msg-Id is derived from the
// original id and the dead-letter sequence) and the ledger recognises
// after it (it dedupes by content). Dead letters stored after Redrive
// began (one re-driven and refused again) are left for the next run.
//
// Redrive connects with cfg's URL, credentials and TLS settings; it fails
// if no server answers within five seconds or ctx ends. On an error it
// returns what it did so far.
func Redrive(ctx context.Context, cfg Config, opts RedriveOptions) (RedriveResult, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return RedriveResult{}, err
	}
	if opts.Subject != "" && !validSubject(opts.Subject, true) {
		return RedriveResult{}, fmt.Errorf("stream: dead letters: %q is not a valid subject", opts.Subject)
	}
	nc, err := connect(cfg)
	if err != nil {
		return RedriveResult{}, err
	}
	defer nc.Close()
	cctx, cancel := context.WithTimeout(ctx, redriveConnectTimeout)
	waitConnected(cctx, nc)
	cancel()
	if !nc.IsConnected() {
		detail := ""
		if err := nc.LastError(); err != nil {
			detail = ": " + err.Error()
		}
		if ctx.Err() != nil {
			return RedriveResult{}, fmt.Errorf("stream: dead letters: %w", ctx.Err())
		}
		return RedriveResult{}, fmt.Errorf("stream: dead letters: cannot reach NATS at %s within %v%s", redactURLs(cfg.URL), redriveConnectTimeout, detail)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return RedriveResult{}, fmt.Errorf("stream: dead letters: %w", err)
	}
	return redrive(ctx, js, cfg, opts)
}

func redrive(ctx context.Context, js jetstream.JetStream, cfg Config, opts RedriveOptions) (RedriveResult, error) {
	var res RedriveResult
	st, err := deadLetterStream(ctx, js, cfg)
	if err != nil {
		return res, err
	}
	res.Stream = st.CachedInfo().Config.Name
	// Only what is there now: a re-driven message refused again comes back
	// behind this point, and must not be re-driven in a loop.
	last := st.CachedInfo().State.LastSeq

	handle := func(raw *jetstream.RawStreamMsg) error {
		dl := deadLetterOf(raw)
		if opts.Subject != "" && !covers(opts.Subject, dl.Subject) {
			return nil
		}
		res.Matched = append(res.Matched, dl)
		if opts.List {
			return nil
		}
		switch {
		case dl.Subject == "":
			res.Skipped = append(res.Skipped, Skip{dl.Seq, "no " + HeaderOriginalSubject + " header: where it came from is unknown"})
			return nil
		case dl.Subject == cfg.DeadLetter || !validSubject(dl.Subject, false):
			res.Skipped = append(res.Skipped, Skip{dl.Seq, fmt.Sprintf("original subject %q cannot be published to", dl.Subject)})
			return nil
		}
		if err := redriveOne(ctx, js, st, res.Stream, dl); err != nil {
			return err
		}
		res.Redriven = append(res.Redriven, dl.Seq)
		return nil
	}

	if opts.Seq != 0 {
		raw, err := getMsg(ctx, st, opts.Seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return res, fmt.Errorf("stream: dead letters: stream %s has no message %d", res.Stream, opts.Seq)
		}
		if err != nil {
			return res, fmt.Errorf("stream: dead letters: stream %s message %d: %w", res.Stream, opts.Seq, err)
		}
		if raw.Subject != cfg.DeadLetter {
			return res, fmt.Errorf("stream: dead letters: message %d of stream %s is on %s, not the dead-letter subject %s", opts.Seq, res.Stream, raw.Subject, cfg.DeadLetter)
		}
		return res, handle(raw)
	}
	for seq := uint64(1); seq <= last; {
		raw, err := getMsg(ctx, st, seq, jetstream.WithGetMsgSubject(cfg.DeadLetter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("stream: dead letters: stream %s from message %d: %w", res.Stream, seq, err)
		}
		if raw.Sequence > last {
			break
		}
		if err := handle(raw); err != nil {
			return res, err
		}
		seq = raw.Sequence + 1
	}
	return res, nil
}

// deadLetterStream finds the stream that keeps cfg.DeadLetter.
func deadLetterStream(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Stream, error) {
	lctx, cancel := context.WithTimeout(ctx, redriveCallTimeout)
	defer cancel()
	name, err := js.StreamNameBySubject(lctx, cfg.DeadLetter)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("stream: dead letters: no stream captures the dead-letter subject %s, so none were kept (paysync run creates %s unless PAYSYNC_NATS_BIND is set)", cfg.DeadLetter, cfg.DeadLetterStream)
	case err != nil:
		// An account that may not list streams: try the default name.
		name = cfg.DeadLetterStream
	case name == cfg.Stream:
		return nil, fmt.Errorf("stream: dead letters: the dead-letter subject %s is captured by the source stream %s itself", cfg.DeadLetter, cfg.Stream)
	}
	st, err := js.Stream(lctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream: dead letters: stream %s: %w", name, err)
	}
	return st, nil
}

func getMsg(ctx context.Context, st jetstream.Stream, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, redriveCallTimeout)
	defer cancel()
	return st.GetMsg(ctx, seq, opts...)
}

// deadLetterOf reads a dead letter's headers.
func deadLetterOf(raw *jetstream.RawStreamMsg) DeadLetter {
	dl := DeadLetter{Seq: raw.Sequence, Time: raw.Time, Data: raw.Data}
	if h := raw.Header; h != nil {
		dl.Subject = h.Get(HeaderOriginalSubject)
		dl.Reason = h.Get(HeaderReason)
		dl.StreamSeq, _ = strconv.ParseUint(h.Get(HeaderStreamSeq), 10, 64)
		dl.MsgID = h.Get(HeaderOriginalMsgID)
	}
	return dl
}

// redriveOne publishes dl's data to its original subject and, once the
// source stream has it, removes dl from the dead-letter stream.
func redriveOne(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, dlStream string, dl DeadLetter) error {
	m := nats.NewMsg(dl.Subject)
	m.Data = dl.Data
	of := dlStream + ":" + strconv.FormatUint(dl.Seq, 10)
	m.Header.Set(HeaderRedriveOf, of)
	// A new id (the original's would be dropped within the duplicate
	// window), the same on every re-drive of this dead letter.
	m.Header.Set(jetstream.MsgIDHeader, redriveMsgID(dl.MsgID, of))

	pctx, cancel := context.WithTimeout(ctx, redriveCallTimeout)
	defer cancel()
	ack, err := js.PublishMsg(pctx, m)
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("stream: re-drive dead letter %d: no stream captures %s: %w", dl.Seq, dl.Subject, err)
	}
	if err != nil {
		return fmt.Errorf("stream: re-drive dead letter %d to %s: %w (nothing removed: running it again is safe)", dl.Seq, dl.Subject, err)
	}
	if ack.Stream == dlStream {
		return fmt.Errorf("stream: re-drive dead letter %d: %s is captured by the dead-letter stream %s itself", dl.Seq, dl.Subject, dlStream)
	}
	dctx, cancel := context.WithTimeout(ctx, redriveCallTimeout)
	defer cancel()
	if err := st.DeleteMsg(dctx, dl.Seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("stream: dead letter %d was re-driven to %s but not removed from %s: %w (running it again is harmless: the ledger recognises the entries)", dl.Seq, dl.Subject, dlStream, err)
	}
	return nil
}

// redriveMsgID is the Nats-Msg-Id of a re-driven message: the original
// id (without the suffix of an earlier re-drive) and where it came from.
func redriveMsgID(original, of string) string {
	original, _, _ = strings.Cut(original, "|redrive:")
	if original == "" {
		return "redrive:" + of
	}
	return original + "|redrive:" + of
}
