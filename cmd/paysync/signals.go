package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/paysync/paysync/worker"
)

// untilStopped serves the daemon's signals until ctx ends (the first
// SIGINT/SIGTERM) or its start-up fails for good (returned): SIGHUP or
// SIGUSR1 polls the inbox now; SIGUSR2 switches debug logging on or off
// (back to configured).
func untilStopped(ctx context.Context, d *worker.Daemon, level *slog.LevelVar, log *slog.Logger) error {
	configured := level.Level()
	poke := make(chan os.Signal, 1)
	signal.Notify(poke, syscall.SIGUSR1, syscall.SIGHUP, syscall.SIGUSR2)
	defer signal.Stop(poke)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-d.Failed():
			log.Error("cannot start: stopping", "err", err)
			return err
		case sig := <-poke:
			switch {
			case sig == syscall.SIGUSR2 && level.Level() == slog.LevelDebug:
				level.Set(configured)
				log.Info("log level back to configured", "level", configured.String())
			case sig == syscall.SIGUSR2:
				level.Set(slog.LevelDebug)
				log.Info("debug logging on (SIGUSR2 again to switch it off)")
			default:
				d.PollNow()
			}
		}
	}
}

// stopDaemon stops gracefully within grace (worker.Daemon.Close), then the
// listener; a second signal stops at once.
func stopDaemon(ctx context.Context, d *worker.Daemon, stopHTTP func(context.Context), grace time.Duration, log *slog.Logger) {
	log.Info("stopping: no new intake; finishing in-flight work", "grace", grace.String())
	graceCtx, cancel := context.WithTimeout(hardStopOf(ctx), grace)
	defer cancel()
	context.AfterFunc(hardStopOf(ctx), func() { log.Warn("second signal: stopping now") })
	if err := d.Close(graceCtx); err != nil {
		log.Warn("stopping", "err", err)
	}
	stopHTTP(graceCtx)
}
