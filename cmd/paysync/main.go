// Command paysync moves hours from time-tracking systems into payroll.
// See the README for the commands and configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// The first SIGINT/SIGTERM asks for a graceful stop, a second one for
	// an immediate stop; both are listened for from the start so that
	// none is lost.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := context.WithCancel(context.Background())
	hard, hardStop := context.WithCancel(context.Background())
	go func() {
		<-sigs
		stop()
		<-sigs
		hardStop()
	}()
	code := run(withHardStop(ctx, hard), os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.LookupEnv)
	os.Exit(code)
}

type hardStopKey struct{}

// withHardStop carries the context a second signal cancels.
func withHardStop(ctx, hard context.Context) context.Context {
	return context.WithValue(ctx, hardStopKey{}, hard)
}

// hardStopOf returns the hard-stop context (never done when absent).
func hardStopOf(ctx context.Context) context.Context {
	if h, ok := ctx.Value(hardStopKey{}).(context.Context); ok {
		return h
	}
	return context.Background()
}
