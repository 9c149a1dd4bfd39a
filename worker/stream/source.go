package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Message is one JetStream message as the sink sees it.
type Message struct {
	Subject   string
	MsgID     string // Nats-Msg-Id header ("" if none)
	StreamSeq uint64
	Delivered uint64    // delivery count (1 = first)
	Stored    time.Time // when the stream stored it (the server's clock)
	Data      []byte
}

// Sink commits a message's entries to the ledger. The source acks only
// after Commit returns nil. An error that is (or wraps) *Invalid — a fault
// of the input itself — parks the message in the dead-letter subject; any
// other error is transient and the message is redelivered later, until it
// succeeds (the consumer's MaxDeliver is unlimited by default). Commit's context is cancelled only by a
// hard stop (Close's context ending).
type Sink interface {
	Commit(ctx context.Context, m Message) (Outcome, error)
}

// BatchSink is a Sink that commits many messages at once (one ledger
// transaction). The source hands it every message it has at hand, up to
// MaxBatch, without waiting for more: a lone message goes alone.
// CommitBatch returns one Result per message, in order; each is treated as
// Commit's return would be.
type BatchSink interface {
	Sink
	CommitBatch(ctx context.Context, ms []Message) []Result
}

// PipelinedSink is a BatchSink whose work on a group comes in two steps:
// PrepareBatch reads and plans the group without writing anything, and
// the step it returns commits it. The source prepares the next group while
// the previous one commits (and is acked), so that the two overlap. What
// the previous group commits meanwhile is the sink's to catch at commit.
type PipelinedSink interface {
	BatchSink
	PrepareBatch(ctx context.Context, ms []Message) (commit func(context.Context) []Result)
}

// Result is one message's outcome in a batch.
type Result struct {
	Outcome Outcome
	Err     error
}

// Outcome is what a successful Commit did.
type Outcome int

// The outcomes.
const (
	Committed Outcome = iota // new entries committed
	Duplicate                // everything in it was committed before
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Duplicate:
		return "duplicate"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Invalid is returned (possibly wrapped) by a Sink for a message that can
// never succeed: it is republished to the dead-letter subject and
// terminated, never redelivered.
type Invalid struct{ Reason string }

func (e *Invalid) Error() string { return "invalid message: " + e.Reason }

// Dead-letter headers. A dead letter's own Nats-Msg-Id is
// "<stream>:<seq>:<original id>", unique per message of the source stream.
const (
	HeaderReason          = "Paysync-Reason"
	HeaderStreamSeq       = "Paysync-Stream-Seq"
	HeaderOriginalSubject = "Paysync-Original-Subject"
	HeaderOriginalMsgID   = "Paysync-Original-Msg-Id"
	// HeaderRedriveOf marks a re-driven message: the dead-letter stream
	// and sequence it came from ("TIMESHEETS_DEADLETTER:7").
	HeaderRedriveOf = "Paysync-Redrive-Of"
)

const (
	ackTimeout        = 15 * time.Second // confirming an ack, retries included
	ackAttemptTimeout = 2 * time.Second  // one DoubleAck
	publishTimeout    = 10 * time.Second // a dead-letter publish
	setupTimeout      = 10 * time.Second // one attempt at stream and consumer setup
	lookupTimeout     = 3 * time.Second  // which stream captures the dead-letter subject
	releaseDelay      = time.Second      // redelivery delay of prefetched messages at Close
	maxTermReason     = 200              // bytes of a TermWithReason reason
	maxReasonHeader   = 1024             // bytes of the Paysync-Reason header

	// Set-up retries back off from firstSetupWait, doubling, up to
	// maxSetupWait while the server is not ready yet, and up to
	// maxRefusedSetupWait while it refuses (an operator's fix takes a while;
	// the retries need not hammer the server meanwhile).
	firstSetupWait      = 250 * time.Millisecond
	maxSetupWait        = 5 * time.Second
	maxRefusedSetupWait = time.Minute
)

// Source consumes a JetStream durable consumer into a Sink.
type Source struct {
	cfg  Config
	sink Sink
	log  *slog.Logger

	turn chan struct{} // holds a token while a message is handled (or once Close has taken it)
	// prep holds a token while a PipelinedSink prepares a group (or once
	// Close has taken it): Close waits for that too.
	prep      chan struct{}
	closing   chan struct{} // closed when Close begins
	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error

	// closeCtx is cancelled when Close begins: it cuts a set-up short.
	closeCtx    context.Context
	closeCancel context.CancelFunc
	wake        chan struct{} // the connection came up: set up now

	mu  sync.Mutex
	run *run // set once consuming has started
	// started guards Start against a second call.
	started bool
	// settled is closed once Start's work is over: consuming, failed, or
	// abandoned at Close (nil before Start).
	settled chan struct{}
	nc      *nats.Conn // set by Start
	// The connection's state as its handlers last reported it, and the
	// last set-up failure, for Status and for logging changes once.
	connKnown, connUp, everUp bool
	connErr                   error
	setupErr                  error

	setupAttempts atomic.Int64 // set-ups tried (tests)
}

// run is what Start sets up; the handler reads it without locking (it is
// complete before consuming starts).
type run struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	cons       jetstream.Consumer
	cc         jetstream.ConsumeContext
	connClosed chan struct{}

	ackWait    time.Duration // the consumer's, as the server has it
	maxDeliver int           // ≤ 0: unlimited
	dlqStream  string        // stream capturing DeadLetter, "" if none (plain publish) or unknown
	// dlqUnknown: bound, and the server did not say which stream captures
	// DeadLetter; dead letters go through JetStream, plainly only when no
	// stream answers.
	dlqUnknown bool

	ctx    context.Context // handler context, cancelled by a hard stop
	cancel context.CancelFunc

	queue    chan jetstream.Msg // from the Consume callback to the worker
	stopWork chan struct{}      // closed when the connection is gone: the worker ends
	stopOnce sync.Once
	workDone chan struct{}
}

func (r *run) stopWorker() { r.stopOnce.Do(func() { close(r.stopWork) }) }

// New validates cfg (after defaults) and returns a Source. It does not
// touch the network.
func New(cfg Config, sink Sink) (*Source, error) {
	if sink == nil {
		return nil, errors.New("stream: config: a Sink is required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	closeCtx, closeCancel := context.WithCancel(context.Background())
	return &Source{
		cfg:         cfg,
		sink:        sink,
		log:         cfg.Logger.With("component", "stream", "stream", cfg.Stream, "consumer", cfg.Durable),
		turn:        make(chan struct{}, 1),
		prep:        make(chan struct{}, 1),
		closing:     make(chan struct{}),
		closeDone:   make(chan struct{}),
		closeCtx:    closeCtx,
		closeCancel: closeCancel,
		wake:        make(chan struct{}, 1),
	}, nil
}

// refusalError marks set-up errors that only a change on the server (an
// operator's) can fix, as opposed to a server not ready yet. Both are
// retried; a refusal more slowly, and logged as an error.
type refusalError struct{ err error }

func (e refusalError) Error() string { return e.err.Error() }
func (e refusalError) Unwrap() error { return e.err }

func refusal(format string, args ...any) error {
	return refusalError{fmt.Errorf(format, args...)}
}

var errClosed = errors.New("stream: source closed")

// Start connects, makes sure the stream, the consumer and the dead-letter
// stream exist (or, with Bind, that the stream and consumer do), and starts
// consuming. It returns promptly: nil once consuming has started, or as
// soon as the server turns out to be unreachable, not ready, or refusing
// the set-up (Bind without the stream or consumer, the dead-letter subject
// captured by the stream itself, an account at its stream limit, no
// JetStream), in which case it keeps connecting and setting up in the
// background with a capped backoff (logging each change once, not each
// retry; Status says what it waits for) until it consumes or Close is
// called: a daemon stays up, not ready, until an operator fixes the
// server. Its errors are a connection it cannot even configure (an
// unreadable nkey seed), a second Start, Close, or ctx ending while the
// server answers. ctx bounds only the start.
func (s *Source) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("stream: start: already started")
	}
	s.started = true
	select {
	case <-s.closing:
		s.mu.Unlock()
		return errClosed
	default:
	}
	settled := make(chan struct{})
	s.settled = settled
	s.mu.Unlock()

	r := &run{connClosed: make(chan struct{}), queue: make(chan jetstream.Msg, s.cfg.PullMaxMessages),
		stopWork: make(chan struct{}), workDone: make(chan struct{})}
	nc, err := connect(s.cfg, s.connOptions(r)...)
	if err != nil {
		close(settled)
		return err
	}
	r.nc = nc
	s.mu.Lock()
	s.nc = nc
	s.mu.Unlock()
	s.noteInitialConn(nc)
	r.js, err = jetstream.New(nc)
	if err != nil {
		nc.Close()
		close(settled)
		return fmt.Errorf("stream: start: %w", err)
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go s.work(r)

	if nc.IsConnected() {
		// One attempt now, so that Start returns consuming when it can.
		err := s.trySetup(ctx, r)
		switch {
		case err == nil:
			close(settled)
			return nil
		case errors.Is(err, errClosed):
			s.abandon(r)
			close(settled)
			return errClosed
		case ctx.Err() != nil:
			s.abandon(r)
			close(settled)
			return fmt.Errorf("stream: start: %w (last error: %v)", ctx.Err(), err)
		}
		// Not ready, or refused: retried in the background like a set-up
		// that first meets the server later, after a wait (the connection
		// being up, its wake-up is spent).
		s.noteSetupErr(err)
		select {
		case <-s.wake:
		default:
		}
	}
	go func() {
		defer close(settled)
		s.setupInBackground(r)
	}()
	return nil
}

// connOptions are the connection's handlers: each change of state is
// logged once (never each retry) and kept for Status.
func (s *Source) connOptions(r *run) []nats.Option {
	url := redactURLs(s.cfg.URL)
	return []nats.Option{
		nats.ConnectHandler(func(nc *nats.Conn) { s.connChanged(true, nil, redactURLs(nc.ConnectedUrlRedacted())) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { s.connChanged(true, nil, redactURLs(nc.ConnectedUrlRedacted())) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				err = errors.New("connection lost")
			}
			s.connChanged(false, err, url)
		}),
		// Called on every failed attempt, the first connection's included:
		// connChanged logs only the first of a run of failures.
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { s.connChanged(false, err, url) }),
		nats.ClosedHandler(func(*nats.Conn) {
			s.log.Info("nats connection closed")
			close(r.connClosed)
		}),
	}
}

// noteInitialConn records the state of a connection just made, unless a
// handler has already reported one.
func (s *Source) noteInitialConn(nc *nats.Conn) {
	s.mu.Lock()
	known := s.connKnown
	s.mu.Unlock()
	if known {
		return
	}
	if nc.IsConnected() {
		s.connChanged(true, nil, redactURLs(nc.ConnectedUrlRedacted()))
		return
	}
	err := nc.LastError()
	if err == nil {
		err = errors.New("no server reachable")
	}
	s.connChanged(false, err, redactURLs(s.cfg.URL))
}

// connChanged records the connection's state and logs it when it changed.
func (s *Source) connChanged(up bool, err error, url string) {
	s.mu.Lock()
	changed := !s.connKnown || s.connUp != up
	everUp := s.everUp
	s.connKnown, s.connUp = true, up
	if up {
		s.everUp, s.connErr = true, nil
	} else if err != nil {
		s.connErr = err
	}
	s.mu.Unlock()
	if !changed {
		return
	}
	switch {
	case up && everUp:
		s.log.Info("nats reconnected", "url", url)
	case up:
		s.log.Info("nats connected", "url", url)
	case everUp:
		s.log.Warn("nats disconnected; reconnecting in the background", "url", url, "err", err)
	default:
		s.log.Warn("nats not reachable; connecting in the background (ledger work goes on)", "url", url, "err", err)
	}
	if up {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// noteSetupErr records a failed set-up and logs it when it differs from
// the previous failure.
func (s *Source) noteSetupErr(err error) {
	s.mu.Lock()
	changed := s.setupErr == nil || s.setupErr.Error() != err.Error()
	s.setupErr = err
	s.mu.Unlock()
	if !changed {
		return
	}
	if transient(err) {
		s.log.Warn("stream set-up failing; retrying in the background", "err", err)
	} else {
		s.log.Error("stream set-up refused by the NATS server: paysync stays up, not ready, and retries until it is fixed", "err", err,
			"retry_at_most_every", maxRefusedSetupWait.String())
	}
}

// setupInBackground retries the set-up until consuming starts or Close.
// A refusal is retried too (more slowly): an operator may fix it while
// the daemon stays up, not ready.
func (s *Source) setupInBackground(r *run) {
	wait := s.nextSetupWait(0, nil)
	for {
		select {
		case <-s.closing:
			s.abandon(r)
			return
		case <-s.wake:
			// Connected (again): try now, and back off afresh.
			wait = s.nextSetupWait(0, nil)
		case <-time.After(wait):
		}
		if !r.nc.IsConnected() {
			continue
		}
		err := s.trySetup(context.Background(), r)
		switch {
		case err == nil:
			return
		case errors.Is(err, errClosed):
			s.abandon(r)
			return
		}
		s.noteSetupErr(err)
		wait = s.nextSetupWait(wait, err)
	}
}

// nextSetupWait is the wait before the next set-up attempt after one that
// failed with err, having waited wait before it (0: the first).
func (s *Source) nextSetupWait(wait time.Duration, err error) time.Duration {
	if s.cfg.setupRetryWait > 0 {
		return s.cfg.setupRetryWait
	}
	return setupBackoff(wait, err)
}

// setupBackoff doubles wait (from firstSetupWait), capped by the kind of
// failure: short while the server is not ready, long while it refuses.
func setupBackoff(wait time.Duration, err error) time.Duration {
	if wait <= 0 {
		return firstSetupWait
	}
	limit := maxSetupWait
	if err != nil && !transient(err) {
		limit = maxRefusedSetupWait
	}
	return min(2*wait, limit)
}

// abandon undoes a start that never consumed.
func (s *Source) abandon(r *run) {
	r.cancel()
	r.nc.Close()
	r.stopWorker()
}

// trySetup runs one set-up (bounded by setupTimeout, and cut short by
// Close) and starts consuming.
func (s *Source) trySetup(ctx context.Context, r *run) error {
	s.setupAttempts.Add(1)
	actx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	stop := context.AfterFunc(s.closeCtx, cancel)
	defer stop()
	if err := s.setup(actx, r); err != nil {
		if s.closeCtx.Err() != nil {
			return errClosed
		}
		if errors.Is(err, nats.ErrNoResponders) {
			// Nothing answers the JetStream API of this account.
			return refusal("stream: jetstream not enabled for this account: nothing answers the JetStream API (%v)", err)
		}
		return err
	}
	return s.consume(r)
}

// consume starts pulling; the source is then running.
func (s *Source) consume(r *run) error {
	cc, err := r.cons.Consume(func(m jetstream.Msg) { s.handle(r, m) },
		jetstream.PullMaxMessages(s.cfg.PullMaxMessages),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// Missing heartbeats while disconnected land here; the
			// consumer recovers by itself once the connection is back.
			s.log.Warn("nats consume", "err", err)
		}),
	)
	if err != nil {
		return fmt.Errorf("stream: consume %s/%s: %w", s.cfg.Stream, s.cfg.Durable, err)
	}
	s.mu.Lock()
	select {
	case <-s.closing:
		s.mu.Unlock()
		cc.Stop()
		return errClosed
	default:
	}
	r.cc = cc
	s.run = r
	s.setupErr = nil
	s.mu.Unlock()
	s.log.Info("consuming", "filter", s.cfg.Filter, "ack_wait", r.ackWait, "max_deliver", r.maxDeliver,
		"dead_letter", s.cfg.DeadLetter, "dead_letter_stream", r.dlqStream)
	if r.maxDeliver > 0 {
		s.log.Warn("the consumer has a finite MaxDeliver: a payroll or ledger outage outlasting that many deliveries turns valid messages into dead letters (re-drive them with `paysync deadletters --redrive` once it is over); give the consumer max_deliver -1",
			"max_deliver", r.maxDeliver, "after_about", retryBudget(s.cfg.NakDelay, s.cfg.MaxNakDelay, r.maxDeliver).Round(time.Second).String())
	}
	return nil
}

// transient reports whether a setup error may go away by itself (the
// server unreachable or still starting), as opposed to a refusal.
func transient(err error) bool {
	if errors.As(err, new(refusalError)) {
		return false
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503
	}
	return true
}

// setup ensures (or, with Bind, finds) the stream and the consumer, and
// ensures (or finds) the stream that keeps dead letters.
func (s *Source) setup(ctx context.Context, r *run) error {
	c := s.cfg
	if c.Bind {
		cons, err := r.js.Consumer(ctx, c.Stream, c.Durable)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return refusal("stream: bind: stream %q does not exist (Bind is set, so paysync does not create it)", c.Stream)
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			return refusal("stream: bind: consumer %q of stream %q does not exist (Bind is set, so paysync does not create it)", c.Durable, c.Stream)
		case err != nil:
			return fmt.Errorf("stream: bind %s/%s: %w", c.Stream, c.Durable, err)
		}
		cc := cons.CachedInfo().Config
		if cc.AckPolicy != jetstream.AckExplicitPolicy {
			return refusal("stream: bind: consumer %q of stream %q has ack policy %v; paysync needs explicit acks", c.Durable, c.Stream, cc.AckPolicy)
		}
		if len(cc.BackOff) > 0 {
			s.log.Warn("bound consumer has a BackOff list: the server uses its first step as the ack deadline", "backoff", cc.BackOff, "ack_wait", cc.AckWait)
		}
		r.cons, r.ackWait, r.maxDeliver = cons, cc.AckWait, cc.MaxDeliver
	} else {
		_, err := r.js.Stream(ctx, c.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = r.js.CreateStream(ctx, StreamConfig(c))
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil // another replica created it meanwhile
			} else if err == nil {
				s.log.Info("created stream", "subjects", c.Subjects)
			}
		}
		if err != nil {
			return fmt.Errorf("stream: stream %s: %w", c.Stream, err)
		}
		cons, err := r.js.CreateOrUpdateConsumer(ctx, c.Stream, jetstream.ConsumerConfig{
			Durable:       c.Durable,
			Description:   "paysync timesheet import",
			FilterSubject: c.Filter,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       c.AckWait,
			MaxDeliver:    c.MaxDeliver,
			MaxAckPending: c.MaxAckPending,
			// No BackOff: it would replace AckWait (see Config.AckWait).
		})
		if err != nil {
			return fmt.Errorf("stream: consumer %s/%s: %w", c.Stream, c.Durable, err)
		}
		r.cons, r.ackWait, r.maxDeliver = cons, c.AckWait, c.MaxDeliver
	}
	if r.ackWait <= 0 {
		r.ackWait = DefaultAckWait
	}

	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	name, err := r.js.StreamNameBySubject(lctx, c.DeadLetter)
	r.dlqStream, r.dlqUnknown = "", false
	switch {
	case err == nil && name == c.Stream:
		return refusal("stream: dead-letter subject %q is captured by stream %q itself: dead letters would be consumed again", c.DeadLetter, c.Stream)
	case err == nil:
		r.dlqStream = name
	case errors.Is(err, jetstream.ErrStreamNotFound) && !c.Bind:
		if r.dlqStream, err = s.createDeadLetterStream(ctx, r); err != nil {
			return err
		}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s.log.Warn("no stream captures the dead-letter subject: invalid messages are published as plain NATS messages and LOST unless something subscribes at that moment; create the stream (deploy/nats/deadletter.json, or nats stream add with --subjects on that subject, limits retention)",
			"subject", c.DeadLetter, "suggested_stream", c.DeadLetterStream)
	case !c.Bind:
		// Without the answer paysync cannot tell whether to create the
		// dead-letter stream: part of the set-up, retried.
		return fmt.Errorf("stream: which stream captures the dead-letter subject %s: %w", c.DeadLetter, err)
	default:
		// Bound (a locked-down account may not be allowed to ask, or a
		// busy server did not answer in time): a publish through
		// JetStream reaches the stream that captures the subject, if any.
		s.log.Warn("cannot tell which stream captures the dead-letter subject; publishing dead letters through JetStream, and plainly only if no stream answers", "subject", c.DeadLetter, "err", err)
		r.dlqUnknown = true
	}
	return nil
}

// deadLetterStreamConfig is the stream Start creates for dead letters:
// kept on disk until re-driven or deleted (limits retention, no limits).
func deadLetterStreamConfig(c Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        c.DeadLetterStream,
		Description: "paysync dead letters: list and re-drive with paysync deadletters",
		Subjects:    []string{c.DeadLetter},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Duplicates:  duplicateWindow,
	}
}

// createDeadLetterStream creates the stream that keeps dead letters and
// returns its name.
func (s *Source) createDeadLetterStream(ctx context.Context, r *run) (string, error) {
	c := s.cfg
	_, err := r.js.CreateStream(ctx, deadLetterStreamConfig(c))
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Another replica created it meanwhile, or a stream of that name
		// captures other subjects.
		name, lerr := r.js.StreamNameBySubject(ctx, c.DeadLetter)
		if lerr == nil && name != c.Stream {
			return name, nil
		}
		return "", refusal("stream: dead-letter stream %q exists but does not capture the dead-letter subject %q: add the subject to it, or name another DeadLetterStream", c.DeadLetterStream, c.DeadLetter)
	}
	if err != nil {
		return "", fmt.Errorf("stream: dead-letter stream %s: %w", c.DeadLetterStream, err)
	}
	s.log.Info("created the dead-letter stream", "dead_letter_stream", c.DeadLetterStream, "subject", c.DeadLetter)
	return c.DeadLetterStream, nil
}

// handle is the Consume callback (called for one message at a time): it
// hands the message to the worker, or releases it once Close has begun.
func (s *Source) handle(r *run, m jetstream.Msg) {
	select {
	case <-s.closing:
		s.release(m)
		return
	default:
	}
	select {
	case <-s.closing:
		s.release(m)
	case r.queue <- m:
	}
}

// work takes the queued messages — as many as are at hand, up to
// MaxBatch, for a BatchSink; one at a time otherwise — and processes
// them while holding the turn. A PipelinedSink's groups are prepared here
// and committed by commitLoop, so that the next group is prepared while
// the previous one commits.
func (s *Source) work(r *run) {
	defer close(r.workDone)
	bs, batching := s.sink.(BatchSink)
	ps, pipelined := s.sink.(PipelinedSink)
	limit := 1
	if batching {
		limit = max(1, min(s.cfg.MaxBatch, s.cfg.MaxAckPending))
	}
	var prepared chan preparedGroup
	if pipelined {
		prepared = make(chan preparedGroup)
		done := make(chan struct{})
		go s.commitLoop(r, prepared, done)
		defer func() { close(prepared); <-done }()
	}
	for {
		var group []jetstream.Msg
		select {
		case m := <-r.queue:
			group = append(group, m)
		case <-r.stopWork:
			return
		}
	more:
		for len(group) < limit {
			select {
			case m := <-r.queue:
				group = append(group, m)
			default:
				break more
			}
		}
		if pipelined {
			s.prepare(r, ps, group, prepared)
			continue
		}
		if !s.take(s.turn) {
			s.releaseAll(group)
			continue
		}
		if batching && len(group) > 1 {
			s.processBatch(r, bs, group)
		} else {
			s.process(r, group[0])
		}
		<-s.turn
	}
}

// take takes token's slot, unless Close has begun (false: nothing taken).
func (s *Source) take(token chan struct{}) bool {
	select {
	case <-s.closing:
		return false
	case token <- struct{}{}:
	}
	select {
	case <-s.closing:
		<-token
		return false
	default:
		return true
	}
}

// preparedGroup is a group on its way from prepare to commitLoop.
type preparedGroup struct {
	ms     []jetstream.Msg
	msgs   []Message
	commit func(context.Context) []Result
	stop   func() // ends the in-progress signals
}

// prepare has the sink prepare a group (holding prep, not the turn) and
// hands it to commitLoop; a group prepared as Close begins is released.
func (s *Source) prepare(r *run, ps PipelinedSink, ms []jetstream.Msg, out chan<- preparedGroup) {
	if !s.take(s.prep) {
		s.releaseAll(ms)
		return
	}
	g := preparedGroup{ms: ms, msgs: messages(ms), stop: s.keepInProgress(r, ms)}
	g.commit = ps.PrepareBatch(r.ctx, g.msgs)
	<-s.prep
	select {
	case out <- g:
	case <-s.closing:
		g.stop()
		s.releaseAll(ms)
	}
}

// commitLoop commits prepared groups in order, each holding the turn, and
// acks them.
func (s *Source) commitLoop(r *run, in <-chan preparedGroup, done chan<- struct{}) {
	defer close(done)
	for g := range in {
		if !s.take(s.turn) {
			g.stop()
			s.releaseAll(g.ms)
			continue
		}
		results := g.commit(r.ctx)
		g.stop()
		s.settleBatch(r, g.ms, g.msgs, results)
		<-s.turn
	}
}

func (s *Source) releaseAll(ms []jetstream.Msg) {
	for _, m := range ms {
		s.release(m)
	}
}

// release gives a prefetched message back at Close, so that another
// replica (or the next start) gets it now rather than after AckWait. The
// short delay, rather than a bare Nak, keeps even a restart loop from
// turning into a redelivery storm.
func (s *Source) release(m jetstream.Msg) {
	if err := m.NakWithDelay(releaseDelay); err != nil {
		s.log.Debug("release at close", "subject", m.Subject(), "err", err)
	}
}

// message is m as a sink sees it.
func message(m jetstream.Msg) Message {
	msg := Message{Subject: m.Subject(), Data: m.Data()}
	if h := m.Headers(); h != nil {
		msg.MsgID = h.Get(jetstream.MsgIDHeader)
	}
	if md, err := m.Metadata(); err == nil {
		msg.StreamSeq, msg.Delivered, msg.Stored = md.Sequence.Stream, md.NumDelivered, md.Timestamp
	}
	return msg
}

func (s *Source) logFor(msg Message) *slog.Logger {
	return s.log.With("subject", msg.Subject, "seq", msg.StreamSeq, "msg_id", msg.MsgID, "delivered", msg.Delivered)
}

// messages is ms as a sink sees them.
func messages(ms []jetstream.Msg) []Message {
	msgs := make([]Message, len(ms))
	for i, m := range ms {
		msgs[i] = message(m)
	}
	return msgs
}

// processBatch commits a group in one call, then settles it.
func (s *Source) processBatch(r *run, bs BatchSink, ms []jetstream.Msg) {
	msgs := messages(ms)
	var results []Result
	s.inProgress(r, ms, func() { results = bs.CommitBatch(r.ctx, msgs) })
	s.settleBatch(r, ms, msgs, results)
}

// settleBatch acks what was committed (one flush for all) and parks or
// retries the rest, message by message.
func (s *Source) settleBatch(r *run, ms []jetstream.Msg, msgs []Message, results []Result) {
	if len(results) != len(ms) {
		err := fmt.Errorf("stream: sink returned %d results for %d messages", len(results), len(ms))
		results = make([]Result, len(ms))
		for i := range results {
			results[i].Err = err
		}
	}
	var acked []jetstream.Msg
	for i, m := range ms {
		res := results[i]
		if res.Err != nil && r.ctx.Err() != nil {
			s.logFor(msgs[i]).Warn("commit interrupted by shutdown", "err", res.Err)
			continue
		}
		if res.Err == nil {
			if err := m.Ack(); err != nil {
				s.logFor(msgs[i]).Warn("ack failed; a redelivery will be a duplicate", "err", err)
			} else {
				acked = append(acked, m)
			}
			s.observe(res.Outcome.String())
			continue
		}
		s.settle(r, m, msgs[i], res.Err, s.logFor(msgs[i]))
	}
	if len(acked) > 0 {
		// The acks are on their way; a flush confirms the server has them
		// (a lost one only means a redelivery, which is a Duplicate).
		ctx, cancel := context.WithTimeout(r.ctx, ackTimeout)
		defer cancel()
		if err := r.nc.FlushWithContext(ctx); err != nil {
			s.log.Warn("acks not confirmed; redeliveries will be duplicates", "messages", len(acked), "err", err)
		} else {
			s.log.Debug("messages acknowledged", "messages", len(acked))
		}
	}
}

func (s *Source) process(r *run, m jetstream.Msg) {
	msg := message(m)
	log := s.logFor(msg)

	outcome, err := s.commit(r, m, msg)
	if err != nil && r.ctx.Err() != nil {
		// Hard stop: leave the message unacknowledged; it comes back
		// after AckWait.
		log.Warn("commit interrupted by shutdown", "err", err)
		return
	}
	switch {
	case err == nil:
		if aerr := s.ack(r, m); aerr != nil {
			// The ledger has it: a redelivery will be a Duplicate.
			log.Warn("ack not confirmed; a redelivery will be a duplicate", "err", aerr)
		} else {
			log.Debug("message acknowledged", "outcome", outcome.String())
		}
		s.observe(outcome.String())
	default:
		s.settle(r, m, msg, err, log)
	}
}

// settle parks an invalid message, or has a failed one retried. Only an
// input fault (*Invalid) is dead-lettered: any other failure (payroll,
// ledger, network) is retried for as long as the server redelivers it,
// which with an unlimited MaxDeliver is until it succeeds.
func (s *Source) settle(r *run, m jetstream.Msg, msg Message, err error, log *slog.Logger) {
	var invalid *Invalid
	switch {
	case errors.As(err, &invalid):
		s.deadLetter(r, m, msg, invalid.Reason, false, log)
	case r.maxDeliver > 0 && msg.Delivered >= uint64(r.maxDeliver):
		// A finite MaxDeliver (a bound consumer's, or configured): the
		// server will not deliver it again, so keep it where it can be
		// re-driven rather than let it sit unconsumed.
		s.deadLetter(r, m, msg, fmt.Sprintf("transient failure, not an input problem: still failing at delivery %d, the consumer's MaxDeliver, so the server would not deliver it again; re-drive it once the cause is fixed: %v", msg.Delivered, err), true, log)
	default:
		d := retryDelay(s.cfg.NakDelay, s.cfg.MaxNakDelay, msg.Delivered)
		// A long outage retries every pending message each MaxNakDelay:
		// log the first failures and then every doubling, not each one.
		lvl := slog.LevelDebug
		if msg.Delivered&(msg.Delivered-1) == 0 {
			lvl = slog.LevelWarn
		}
		log.Log(context.Background(), lvl, "commit failed; retrying later", "err", err, "retry_in", d)
		if nerr := m.NakWithDelay(d); nerr != nil {
			log.Warn("nak failed; the message comes back after AckWait", "err", nerr)
		}
		s.observe("retry")
	}
}

// ack acknowledges m and waits for the server's confirmation, trying
// again for a while when none comes: while a server shuts down or restarts,
// an ack meets "no responders" or goes unanswered, yet the same ack is
// accepted once the consumer is back, which saves a redelivery.
func (s *Source) ack(r *run, m jetstream.Msg) error {
	deadline := time.Now().Add(ackTimeout)
	wait := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(r.ctx, ackAttemptTimeout)
		err := m.DoubleAck(ctx)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return nil
		}
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-time.After(wait):
		case <-r.ctx.Done():
			return err
		}
		wait = min(2*wait, time.Second)
	}
}

// commit calls the sink, telling the server every AckWait/3 that the
// message is still being worked on.
func (s *Source) commit(r *run, m jetstream.Msg, msg Message) (out Outcome, err error) {
	s.inProgress(r, []jetstream.Msg{m}, func() { out, err = s.sink.Commit(r.ctx, msg) })
	return out, err
}

// inProgress runs fn, telling the server every AckWait/3 that the messages
// are still being worked on.
func (s *Source) inProgress(r *run, ms []jetstream.Msg, fn func()) {
	// The ticker must be gone before the messages are acked.
	defer s.keepInProgress(r, ms)()
	fn()
}

// keepInProgress tells the server every AckWait/3 that the messages are
// still being worked on, until the returned stop is called (and has
// returned: then no signal is on its way).
func (s *Source) keepInProgress(r *run, ms []jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(r.ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, m := range ms {
					if err := m.InProgress(); err != nil {
						s.log.Warn("in-progress signal failed", "subject", m.Subject(), "err", err)
					}
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// deadLetter republishes the message's data to the dead-letter subject,
// then terminates it. If the publish fails, the message is retried later
// instead, so that it is never dropped unrecorded. A transient failure
// (at the last delivery of a finite MaxDeliver) is dead-lettered only into
// a stream, where it is kept for a re-drive: never as a plain message.
func (s *Source) deadLetter(r *run, m jetstream.Msg, msg Message, reason string, transientFailure bool, log *slog.Logger) {
	dl := nats.NewMsg(s.cfg.DeadLetter)
	dl.Data = msg.Data
	dl.Header.Set(HeaderReason, headerValue(reason, maxReasonHeader))
	dl.Header.Set(HeaderStreamSeq, strconv.FormatUint(msg.StreamSeq, 10))
	dl.Header.Set(HeaderOriginalSubject, msg.Subject)
	if msg.MsgID != "" {
		dl.Header.Set(HeaderOriginalMsgID, msg.MsgID)
	}
	// One id per message of the source stream: a dead letter published
	// twice (its term lost) is kept once, and the same entry dead-lettered
	// again after a re-drive (a new message) is kept again.
	dl.Header.Set(jetstream.MsgIDHeader, deadLetterMsgID(s.cfg.Stream, msg))
	lastDelivery := r.maxDeliver > 0 && msg.Delivered >= uint64(r.maxDeliver)

	ctx, cancel := context.WithTimeout(r.ctx, publishTimeout)
	defer cancel()
	// While the connection is being re-established (a server restart), a
	// publish would fail or sit in the reconnect buffer unconfirmed, and
	// the nak too: the message would come back only after AckWait. Wait
	// for the connection instead (within the publish timeout).
	waitConnected(ctx, r.nc)
	kept, err := s.publishDeadLetter(ctx, r, dl, transientFailure)
	if errors.Is(err, errNoDeadLetterStream) {
		// Nothing would keep it: leave it unacknowledged. The server does
		// not deliver it again, and with work-queue retention it stays in
		// the stream for an operator.
		log.Error("still failing at the consumer's last delivery (MaxDeliver) and no stream keeps dead letters: the message stays in the stream, unconsumed; give the consumer max_deliver -1 and the dead-letter subject a stream", "reason", reason, "dead_letter", s.cfg.DeadLetter)
		s.observe("retry")
		return
	}
	if err != nil {
		if lastDelivery {
			// The server will not deliver it again; with work-queue
			// retention it stays in the stream for an operator.
			log.Error("dead-letter publish failed at the last delivery: the message stays in the stream, unconsumed", "reason", reason, "err", err)
			return
		}
		d := retryDelay(s.cfg.NakDelay, s.cfg.MaxNakDelay, msg.Delivered)
		log.Error("dead-letter publish failed; retrying the message later", "reason", reason, "err", err, "retry_in", d)
		if nerr := m.NakWithDelay(d); nerr != nil {
			log.Warn("nak failed; the message comes back after AckWait", "err", nerr)
		}
		s.observe("retry")
		return
	}
	if err := m.TermWithReason(truncate(oneLine(reason), maxTermReason)); err != nil {
		log.Error("term failed; the message will be redelivered and dead-lettered again", "err", err)
	}
	log.Error("message dead-lettered", "reason", reason, "dead_letter", s.cfg.DeadLetter, "dead_letter_stream", kept)
	if transientFailure {
		s.observe("dead-lettered")
	} else {
		s.observe("invalid")
	}
}

// errNoDeadLetterStream: no stream captures the dead-letter subject.
var errNoDeadLetterStream = errors.New("no stream captures the dead-letter subject")

// publishDeadLetter publishes dl through JetStream when a stream captures
// the dead-letter subject, or may (r.dlqUnknown), and returns the stream
// that confirmed it. Else, or when no stream answers after all, it
// publishes dl plainly (kept is ""), unless streamOnly: then it returns
// errNoDeadLetterStream.
func (s *Source) publishDeadLetter(ctx context.Context, r *run, dl *nats.Msg, streamOnly bool) (kept string, err error) {
	if r.dlqStream != "" || r.dlqUnknown {
		ack, err := r.js.PublishMsg(ctx, dl)
		switch {
		case err == nil:
			return ack.Stream, nil
		case !r.dlqUnknown || !errors.Is(err, jetstream.ErrNoStreamResponse):
			// A timeout may be a busy stream: the message is retried,
			// never published plainly past a stream.
			return "", err
		}
		// Nobody answers, so no stream captures the subject.
	}
	if streamOnly {
		return "", errNoDeadLetterStream
	}
	if err := r.nc.PublishMsg(dl); err != nil {
		return "", err
	}
	return "", r.nc.FlushWithContext(ctx)
}

// deadLetterMsgID is a dead letter's Nats-Msg-Id: the source stream and
// sequence, and the original id.
func deadLetterMsgID(stream string, msg Message) string {
	id := stream + ":" + strconv.FormatUint(msg.StreamSeq, 10)
	if msg.MsgID != "" {
		id += ":" + msg.MsgID
	}
	return id
}

// waitConnected returns when nc is connected or ctx ends.
func waitConnected(ctx context.Context, nc *nats.Conn) {
	for !nc.IsConnected() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Source) observe(outcome string) {
	if s.cfg.Observe != nil {
		s.cfg.Observe(outcome)
	}
}

// Close stops consuming gracefully: no new message is taken, the one being
// committed is finished and its ack confirmed, prefetched ones are
// released, and the connection is drained. When ctx ends first, the
// commit's context is cancelled and the connection closed at once (an
// unacknowledged message is then redelivered after AckWait). Close may be
// called more than once, and before or during Start.
func (s *Source) Close(ctx context.Context) error {
	first := false
	s.closeOnce.Do(func() { first = true; close(s.closing) })
	if !first {
		select {
		case <-s.closeDone:
			return s.closeErr
		case <-ctx.Done():
			return fmt.Errorf("stream: close: %w", ctx.Err())
		}
	}
	s.closeErr = s.close(ctx)
	close(s.closeDone)
	return s.closeErr
}

func (s *Source) close(ctx context.Context) error {
	s.closeCancel() // cuts a set-up in progress short
	s.mu.Lock()
	settled := s.settled
	s.mu.Unlock()
	if settled == nil {
		return nil // not started (Start will see closing)
	}
	// Wait for Start, or its background set-up, to consume or give up.
	select {
	case <-settled:
	case <-ctx.Done():
		return fmt.Errorf("stream: close: %w", ctx.Err())
	}
	s.mu.Lock()
	r := s.run
	s.mu.Unlock()
	if r == nil {
		return nil // never consumed: the connection is closed already
	}
	hardStop := func() error {
		r.cancel()
		r.cc.Stop()
		r.nc.Close()
		r.stopWorker()
		s.log.Warn("hard stop: a message in flight will be redelivered after AckWait")
		return fmt.Errorf("stream: close: %w", ctx.Err())
	}

	// Stop pulling. Messages already prefetched still pass through handle,
	// which releases them now that closing is closed.
	r.cc.Drain()
	// Taking the turn waits for the message in flight, ack included, and
	// taking prep for a group being prepared (released once prepared).
	for _, token := range []chan struct{}{s.turn, s.prep} {
		select {
		case token <- struct{}{}:
		case <-ctx.Done():
			return hardStop()
		}
	}
	// Drain flushes the releases and terms still buffered, then closes.
	if err := r.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Warn("nats drain", "err", err)
		r.nc.Close()
	}
	select {
	case <-r.connClosed:
	case <-ctx.Done():
		return hardStop()
	}
	r.stopWorker()
	r.cancel()
	s.log.Info("stopped consuming")
	return nil
}

// Connected reports whether the connection to NATS is up and consuming
// has started (for readiness); Status says why not.
func (s *Source) Connected() bool {
	ok, _ := s.Status()
	return ok
}

// Status reports whether the source is consuming over a live connection
// and, when it is not, why, in one line fit for /readyz (the server URL
// without credentials): not started, connecting, disconnected, the stream
// set-up failing (the server not ready) or refused (until an operator
// fixes the server), or closed.
func (s *Source) Status() (ok bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		return false, "stopped"
	default:
	}
	url := redactURLs(s.cfg.URL)
	switch {
	case s.nc == nil:
		return false, "not started"
	case !s.nc.IsConnected() && s.everUp:
		return false, "disconnected from " + url + ", reconnecting" + errSuffix(s.connErr)
	case !s.nc.IsConnected():
		return false, "not connected to " + url + ", connecting" + errSuffix(s.connErr)
	case s.run == nil && s.setupErr != nil && !transient(s.setupErr):
		return false, "stream set-up refused: " + s.setupErr.Error() + ", retrying"
	case s.run == nil && s.setupErr != nil:
		return false, "stream set-up failing: " + s.setupErr.Error() + ", retrying"
	case s.run == nil:
		return false, "setting up stream " + s.cfg.Stream + " and consumer " + s.cfg.Durable
	}
	return true, ""
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// Pending returns the consumer's lag: messages not yet delivered plus
// messages delivered and not yet acknowledged.
func (s *Source) Pending(ctx context.Context) (uint64, error) {
	s.mu.Lock()
	r := s.run
	s.mu.Unlock()
	if r == nil {
		return 0, errors.New("stream: pending: not started")
	}
	info, err := r.cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream: pending: %w", err)
	}
	return info.NumPending + uint64(max(info.NumAckPending, 0)), nil
}

// retryDelay is base doubled per delivery after the first, capped at
// limit (or at base, when that is longer).
func retryDelay(base, limit time.Duration, delivered uint64) time.Duration {
	limit = max(limit, base)
	d := base
	for i := uint64(1); i < delivered && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// retryBudget is about how long a message failing at every delivery takes
// to reach delivery maxDeliver.
func retryBudget(base, limit time.Duration, maxDeliver int) time.Duration {
	var total time.Duration
	for d := 1; d < maxDeliver; d++ {
		total += retryDelay(base, limit, uint64(d))
	}
	return total
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// headerValue makes s safe as a header value (no line breaks) of at most n bytes.
func headerValue(s string, n int) string {
	return truncate(oneLine(s), n)
}
