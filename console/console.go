package console

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/stream"
)

//go:embed templates
var files embed.FS

// Config is what a console serves.
type Config struct {
	Ledger *ledger.Ledger
	// Password is PAYSYNC_CONSOLE_PASSWORD; "" serves loopback only.
	Password string
	// Actions carries out reverts, replays and closes; nil: read-only.
	Actions *Actions
	// Readiness are the conditions the overview shows (the daemon's
	// /readyz checks inside paysync run); nil: the ledger's probe.
	Readiness []worker.Check
	// NATS is where the dead letters are: the rejects page lists them
	// (stream.Redrive, list only). nil: NATS is not configured.
	NATS *stream.Config
	// Mode says who serves it ("paysync run", "paysync console").
	Mode   string
	Logger *slog.Logger
	Now    func() time.Time
}

// Server is the console's HTTP handler.
type Server struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	auth  *auth
	pages map[string]*template.Template
	mux   *http.ServeMux
	tls   bool
}

// New builds the console.
func New(cfg Config) (*Server, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("console: no ledger")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now}
	s.auth = newAuth(cfg.Password, cfg.Now)
	if err := s.parse(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Handler serves the console.
func (s *Server) Handler() http.Handler { return s }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /style.css", s.style)
	m.HandleFunc("GET /login", s.loginForm)
	m.HandleFunc("POST /login", s.login)
	m.Handle("POST /logout", s.guard(s.logout))
	m.Handle("GET /{$}", s.guard(s.overview))
	m.Handle("GET /periods", s.guard(s.periods))
	m.Handle("GET /period", s.guard(s.periodPage))
	m.Handle("GET /imports", s.guard(s.imports))
	m.Handle("GET /imports/{id}", s.guard(s.importPage))
	m.Handle("GET /batches", s.guard(s.batches))
	m.Handle("GET /batches/{id}", s.guard(s.batchPage))
	m.Handle("GET /rejects", s.guard(s.rejects))
	m.Handle("GET /corrections", s.guard(s.corrections))
	m.Handle("GET /corrections/{id}", s.guard(s.correctionPage))
	m.Handle("GET /audit", s.guard(s.auditPage))
	m.Handle("GET /actions/{op}", s.guard(s.preview))
	m.Handle("POST /actions/{op}", s.guard(s.act))
	m.Handle("/", s.guard(func(w http.ResponseWriter, r *http.Request, _ who) {
		s.fail(w, r, http.StatusNotFound, "no such page")
	}))
	s.mux = m
}

// Listener settings (PAYSYNC_CONSOLE_*).
type Listen struct {
	Addr              string // "": no console
	CertFile, KeyFile string // both or neither: TLS
}

// Serve listens on l.Addr and serves until ctx ends or the returned
// shutdown is called. Without a password it refuses an address beyond
// loopback.
func (s *Server) Serve(ctx context.Context, l Listen) (addr string, shutdown func(context.Context), err error) {
	if (l.CertFile == "") != (l.KeyFile == "") {
		return "", nil, errors.New("console: PAYSYNC_CONSOLE_TLS_CERT and PAYSYNC_CONSOLE_TLS_KEY go together")
	}
	if s.cfg.Password == "" && !LoopbackAddr(l.Addr) {
		return "", nil, fmt.Errorf("console: %s is beyond loopback: set PAYSYNC_CONSOLE_PASSWORD, or listen on 127.0.0.1", l.Addr)
	}
	var tc *tls.Config
	if l.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile)
		if err != nil {
			return "", nil, fmt.Errorf("console: TLS certificate: %w", err)
		}
		tc = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.tls = true
	}
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return "", nil, fmt.Errorf("console: listen on PAYSYNC_CONSOLE_ADDR %s: %w", l.Addr, err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go srv.Serve(ln)
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String(), func(ctx context.Context) { srv.Shutdown(ctx) }, nil
}

// LoopbackAddr reports whether a listen address is on loopback only.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return loopbackHost(host)
}

func loopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
