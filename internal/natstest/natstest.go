// Package natstest runs an embedded nats-server with JetStream for tests
// and the load tool, so every one of them starts it the same way.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyWait bounds the wait for the server to accept clients: generous,
// for a loaded machine under -race.
const readyWait = 30 * time.Second

// Option changes the server's options before it starts.
type Option func(*server.Options)

// WithPort listens on port instead of a random one (a restart on the same
// address).
func WithPort(port int) Option { return func(o *server.Options) { o.Port = port } }

// WithStoreDir stores JetStream's data in dir (a restart keeping the
// streams).
func WithStoreDir(dir string) Option { return func(o *server.Options) { o.StoreDir = dir } }

// WithoutJetStream starts the server with JetStream off.
func WithoutJetStream() Option { return func(o *server.Options) { o.JetStream = false } }

// WithUser makes clients authenticate as user with password pass.
func WithUser(user, pass string) Option {
	return func(o *server.Options) { o.Username, o.Password = user, pass }
}

// WithOptions changes the options directly (users with permissions,
// limits); the *server.Options it sees is the one the server runs with, so
// a test may keep it to Clone for ReloadOptions.
func WithOptions(f func(*server.Options)) Option { return Option(f) }

// Run starts a server on 127.0.0.1, a random port, JetStream on, no log,
// no signal handlers, and waits until it accepts clients. With JetStream
// on, a store dir must be given: the server's default is shared by every
// process on the machine. The caller shuts it down.
func Run(opts ...Option) (*server.Server, error) {
	return run(build(opts))
}

// Start is Run for a test: the store is in t.TempDir() unless given, and
// the server shuts down when the test ends (also if the test shut it down
// already, for a restart).
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	o := build(opts)
	if o.StoreDir == "" {
		// Before the Cleanup below, so the dir is removed after the shutdown.
		o.StoreDir = t.TempDir()
	}
	ns, err := run(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func build(opts []Option) *server.Options {
	o := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, NoLog: true, NoSigs: true}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

func run(o *server.Options) (*server.Server, error) {
	if o.JetStream && o.StoreDir == "" {
		return nil, errors.New("natstest: JetStream needs a store dir")
	}
	ns, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("natstest: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(readyWait) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("natstest: nats-server not ready after %v", readyWait)
	}
	return ns, nil
}

// Port is the port ns listens on, for a restart at the same address.
func Port(t testing.TB, ns *server.Server) int {
	t.Helper()
	addr, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("nats-server address %v is not TCP", ns.Addr())
	}
	return addr.Port
}

// Connect connects a client to url and opens JetStream on it; the
// connection closes when the test ends.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}
