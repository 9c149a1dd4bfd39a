package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Defaults of Config.
const (
	DefaultStream          = "TIMESHEETS"
	DefaultSubject         = "timesheets.>"
	DefaultDurable         = "paysync"
	DefaultDeadLetter      = "paysync.deadletter"
	DefaultAckWait         = 30 * time.Second
	DefaultMaxDeliver      = -1 // unlimited: a transient failure is retried, never dead-lettered
	DefaultMaxAckPending   = 1024
	DefaultPullMaxMessages = 512
	DefaultMaxBatch        = 256
	DefaultNakDelay        = 2 * time.Second
	DefaultMaxNakDelay     = time.Minute
	DefaultName            = "paysync"
	// DeadLetterStreamSuffix names the dead-letter stream Start creates:
	// Stream + DeadLetterStreamSuffix ("TIMESHEETS_DEADLETTER").
	DeadLetterStreamSuffix = "_DEADLETTER"

	// duplicateWindow is the Nats-Msg-Id window of a stream Start creates.
	duplicateWindow = 2 * time.Minute
)

// Config configures the connection, the stream and the consumer. Zero
// fields take the defaults above.
type Config struct {
	URL          string // NATS_URL: one server URL or several, comma-separated; required
	CredsFile    string // NATS_CREDS: JWT + nkey .creds file
	NKeySeedFile string // nkey seed file (not with CredsFile)

	CAFile   string // PEM roots that verify the server
	CertFile string // client certificate (mutual TLS), with KeyFile
	KeyFile  string

	Stream   string   // stream name
	Subjects []string // the stream's subjects, when Start creates it
	Durable  string   // durable consumer name
	// Filter is the consumer's filter subject (default: the first of
	// Subjects), e.g. "timesheets.MV8x.>" for one replica's companies.
	Filter string
	// DeadLetter is the subject invalid messages are republished to. No
	// pattern of Subjects may match it: dead letters would be consumed again.
	DeadLetter string
	// DeadLetterStream names the stream Start creates (file storage, limits
	// retention: kept until re-driven or deleted) to capture DeadLetter when
	// no stream does (default Stream + "_DEADLETTER"). An existing stream
	// that captures DeadLetter is used as it is, whatever its name.
	DeadLetterStream string
	// Bind makes Start use an existing stream and consumer, and neither
	// create nor update them (accounts without those permissions).
	Bind bool

	// AckWait is how long the server waits for an ack before redelivering.
	// There is deliberately no BackOff list: the server would replace
	// AckWait with BackOff[0], silently shortening the ack deadline of
	// every first delivery. Retry delays come from NakDelay instead.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one message: -1 (the default) for
	// unlimited, or at least 1. A transient failure is retried for as long
	// as the server redelivers; with a finite MaxDeliver, one still failing
	// at the last delivery is dead-lettered as transient (re-drivable with
	// Redrive), since the server would not deliver it again. Keep it
	// unlimited unless an operator watches the dead letters.
	MaxDeliver int
	// MaxAckPending bounds the consumer's unacknowledged messages.
	MaxAckPending int
	// PullMaxMessages bounds the messages buffered in the client.
	PullMaxMessages int
	// MaxBatch bounds the messages a BatchSink gets at once (default
	// DefaultMaxBatch): larger groups commit with fewer transactions but
	// hold the ledger's single writer longer (intake yields it to the
	// sender between messages). 256 rather than 64 took a 100,000-message
	// backlog from 134 to 111-115 µs of CPU per pay part (BENCHMARKS.md).
	MaxBatch int
	// NakDelay is the first retry delay; it doubles per delivery, capped
	// at MaxNakDelay.
	NakDelay time.Duration
	// MaxNakDelay caps the retry delay (default one minute): during a long
	// outage, each pending message is tried again this often.
	MaxNakDelay time.Duration

	Name   string // connection name, shown by the server's monitoring
	Logger *slog.Logger

	// reconnectWait overrides the connection's 2 s between attempts (tests).
	reconnectWait time.Duration
	// setupRetryWait, when set, is the fixed wait between set-up attempts
	// instead of the capped backoff (tests).
	setupRetryWait time.Duration

	// Observe, when set, is called with each message's outcome:
	// "committed", "duplicate", "invalid" (dead-lettered as an input
	// problem), "retry", or "dead-lettered" (a transient failure at the
	// last delivery of a finite MaxDeliver).
	Observe func(outcome string)
}

// withDefaults returns c with its zero fields set.
func (c Config) withDefaults() Config {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if len(c.Subjects) == 0 {
		c.Subjects = []string{DefaultSubject}
	}
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	if c.Filter == "" {
		c.Filter = c.Subjects[0]
	}
	if c.DeadLetter == "" {
		c.DeadLetter = DefaultDeadLetter
	}
	if c.DeadLetterStream == "" {
		c.DeadLetterStream = c.Stream + DeadLetterStreamSuffix
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.PullMaxMessages == 0 {
		c.PullMaxMessages = DefaultPullMaxMessages
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.NakDelay == 0 {
		c.NakDelay = DefaultNakDelay
	}
	if c.MaxNakDelay == 0 {
		c.MaxNakDelay = DefaultMaxNakDelay
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks a Config that has its defaults. Errors name the field.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if strings.TrimSpace(c.URL) == "" {
		bad("URL (NATS_URL) is required")
	}
	errs = append(errs, c.validateAuth())
	if !validName(c.Stream) {
		bad("Stream %q is not a valid stream name (no spaces, dots, '*' or '>')", c.Stream)
	}
	if !validName(c.DeadLetterStream) {
		bad("DeadLetterStream %q is not a valid stream name (no spaces, dots, '*' or '>')", c.DeadLetterStream)
	} else if c.DeadLetterStream == c.Stream {
		bad("DeadLetterStream %q is the source stream itself", c.DeadLetterStream)
	}
	if !validName(c.Durable) {
		bad("Durable %q is not a valid consumer name (no spaces, dots, '*' or '>')", c.Durable)
	}
	for _, s := range c.Subjects {
		if !validSubject(s, true) {
			bad("Subjects: %q is not a valid subject", s)
		}
	}
	if !validSubject(c.Filter, true) {
		bad("Filter %q is not a valid subject", c.Filter)
	} else if !c.Bind && !coveredByAny(c.Subjects, c.Filter) {
		bad("Filter %q is not within the stream's Subjects %q", c.Filter, c.Subjects)
	}
	if !validSubject(c.DeadLetter, false) {
		bad("DeadLetter %q is not a valid subject without wildcards", c.DeadLetter)
	} else {
		for _, s := range c.Subjects {
			if covers(s, c.DeadLetter) {
				bad("DeadLetter %q is captured by the stream subject %q: dead letters would be consumed again", c.DeadLetter, s)
			}
		}
	}
	if c.AckWait < time.Second {
		bad("AckWait %v is below 1s", c.AckWait)
	}
	if c.MaxDeliver < 1 && c.MaxDeliver != -1 {
		bad("MaxDeliver %d must be -1 (unlimited) or at least 1", c.MaxDeliver)
	}
	if c.MaxAckPending < 1 {
		bad("MaxAckPending %d must be at least 1", c.MaxAckPending)
	}
	if c.PullMaxMessages < 1 {
		bad("PullMaxMessages %d must be at least 1", c.PullMaxMessages)
	} else if c.PullMaxMessages > c.MaxAckPending {
		bad("PullMaxMessages %d exceeds MaxAckPending %d", c.PullMaxMessages, c.MaxAckPending)
	}
	if c.NakDelay < 0 {
		bad("NakDelay %v is negative", c.NakDelay)
	}
	if c.MaxNakDelay < 0 {
		bad("MaxNakDelay %v is negative", c.MaxNakDelay)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stream: config: %w", err)
	}
	return nil
}

func (c Config) validateAuth() error {
	var errs []error
	if c.CredsFile != "" && c.NKeySeedFile != "" {
		errs = append(errs, errors.New("CredsFile (NATS_CREDS) and NKeySeedFile are exclusive: a creds file carries its own key"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("CertFile and KeyFile go together"))
	}
	return errors.Join(errs...)
}

// Connect connects to NATS with cfg's URL, credentials and TLS settings,
// reconnecting forever (disconnects and reconnects are logged). It returns
// at once even when no server is reachable yet, and keeps trying.
func Connect(cfg Config) (*nats.Conn, error) {
	return connect(cfg.withDefaults())
}

// connect expects cfg with defaults; extra options come last and win.
func connect(cfg Config, extra ...nats.Option) (*nats.Conn, error) {
	if strings.TrimSpace(cfg.URL) == "" {
		return nil, errors.New("stream: connect: URL (NATS_URL) is required")
	}
	if err := cfg.validateAuth(); err != nil {
		return nil, fmt.Errorf("stream: connect: %w", err)
	}
	log := cfg.Logger
	opts := []nats.Option{
		nats.Name(cfg.Name),
		// A client that stops reconnecting leaves its consumers reporting
		// missing heartbeats forever (nats.go#1622): never give up.
		nats.MaxReconnects(-1),
		nats.ReconnectWait(2 * time.Second),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", redactURLs(nc.ConnectedUrlRedacted()))
		}),
		// With RetryOnFailedConnect, a first connection made late calls
		// this one, not the reconnect handler.
		nats.ConnectHandler(func(nc *nats.Conn) {
			log.Info("nats connected", "url", redactURLs(nc.ConnectedUrlRedacted()))
		}),
		nats.ClosedHandler(func(*nats.Conn) { log.Info("nats connection closed") }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats error", "subject", subject, "err", err)
		}),
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NKeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("stream: connect: nkey seed %s: %w", cfg.NKeySeedFile, err)
		}
		opts = append(opts, opt)
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	if cfg.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.CertFile, cfg.KeyFile))
	}
	if cfg.reconnectWait > 0 {
		opts = append(opts, nats.ReconnectWait(cfg.reconnectWait))
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect(normalizeURLs(cfg.URL), opts...)
	if err != nil {
		// A URL parse error quotes the raw URL: never let credentials out.
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("stream: connect %s: %v", redactURLs(cfg.URL), ue.Err)
		}
		return nil, fmt.Errorf("stream: connect %s: %w", redactURLs(cfg.URL), err)
	}
	return nc, nil
}

// normalizeURLs trims the spaces around the commas of a URL list.
func normalizeURLs(s string) string {
	parts := strings.Split(s, ",")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}

// redactURLs hides user:password in URLs for error messages.
func redactURLs(s string) string {
	parts := strings.Split(normalizeURLs(s), ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			scheme := ""
			if j := strings.Index(p, "://"); j >= 0 && j < at {
				scheme = p[:j+3]
			}
			parts[i] = scheme + "***" + p[at:]
		}
	}
	return strings.Join(parts, ",")
}
