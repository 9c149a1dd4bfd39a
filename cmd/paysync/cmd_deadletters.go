package main

import (
	"context"
	"fmt"

	"github.com/paysync/paysync/worker/stream"
)

// runDeadLetters lists the NATS dead letters kept in the dead-letter stream
// and, with --redrive, publishes them again to their original subjects once
// their cause is fixed (stream.Redrive). A dead letter leaves the
// dead-letter stream only once the source stream has its re-drive, so an
// interrupted re-drive is finished by running it again.
func runDeadLetters(ctx context.Context, args []string, std stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var redrive, asJSON bool
	var seq uint64
	var subject, natsURL string
	fs := newFlagSet("deadletters", "deadletters [--redrive] [--seq N] [--subject S] [--json]", std)
	fs.BoolVar(&redrive, "redrive", false, "publish the selected dead letters again to their original subjects (once the cause is fixed); each leaves the dead-letter stream once the source stream has it")
	fs.Uint64Var(&seq, "seq", 0, "only the dead letter with this sequence (the SEQ column)")
	fs.StringVar(&subject, "subject", "", "only dead letters from this original subject (wildcards allowed: timesheets.MV8x.>)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.StringVar(&natsURL, "nats-url", "", "NATS server(s) (default: NATS_URL; credentials belong in NATS_URL or NATS_CREDS, not on the command line)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if natsURL != "" {
		cfg.NATSURL = natsURL
	}
	if cfg.NATSURL == "" {
		return usagef("config: NATS_URL is not set")
	}
	scfg := cfg.streamConfig(nil)
	scfg.Name = "paysync-deadletters"
	if _, err := stream.New(scfg, deadLettersSink{}); err != nil { // the same checks as run's
		return usagef("%v", err)
	}
	res, rerr := stream.Redrive(ctx, scfg, stream.RedriveOptions{Seq: seq, Subject: subject, List: !redrive})
	if rerr != nil && len(res.Matched) == 0 {
		return fmt.Errorf("deadletters: %w", rerr)
	}
	if asJSON {
		if err := writeJSON(std.out, deadLettersJSON(res, redrive)); err != nil {
			return err
		}
	} else if err := writeDeadLetters(std, res, redrive); err != nil {
		return err
	}
	if rerr != nil {
		return fmt.Errorf("deadletters: %w", rerr)
	}
	return nil
}

// deadLettersSink lets stream.New validate a configuration; it never commits.
type deadLettersSink struct{}

func (deadLettersSink) Commit(context.Context, stream.Message) (stream.Outcome, error) {
	return 0, fmt.Errorf("deadletters: no commits")
}

type deadLetterJSON struct {
	stream.DeadLetter
	Data     string `json:"data"`
	Redriven bool   `json:"redriven,omitempty"`
	Skipped  string `json:"skipped,omitempty"`
}

type deadLettersOut struct {
	Stream      string           `json:"stream"`
	DeadLetters []deadLetterJSON `json:"dead_letters"`
	Redriven    int              `json:"redriven"`
}

func deadLettersJSON(res stream.RedriveResult, redrive bool) deadLettersOut {
	done, skipped := redriveState(res)
	out := deadLettersOut{Stream: res.Stream, DeadLetters: []deadLetterJSON{}, Redriven: len(res.Redriven)}
	for _, dl := range res.Matched {
		j := deadLetterJSON{DeadLetter: dl, Data: string(dl.Data)}
		if redrive {
			j.Redriven, j.Skipped = done[dl.Seq], skipped[dl.Seq]
		}
		out.DeadLetters = append(out.DeadLetters, j)
	}
	return out
}

func redriveState(res stream.RedriveResult) (map[uint64]bool, map[uint64]string) {
	done := map[uint64]bool{}
	for _, s := range res.Redriven {
		done[s] = true
	}
	skipped := map[uint64]string{}
	for _, s := range res.Skipped {
		skipped[s.Seq] = s.Reason
	}
	return done, skipped
}

func writeDeadLetters(std stdio, res stream.RedriveResult, redrive bool) error {
	if len(res.Matched) == 0 {
		_, err := fmt.Fprintf(std.out, "no dead letters in %s\n", res.Stream)
		return err
	}
	done, skipped := redriveState(res)
	headers := []string{"SEQ", "TIME", "SUBJECT", "REASON"}
	if redrive {
		headers = append(headers, "RE-DRIVE")
	}
	t := newTable(std.out, headers...)
	for _, dl := range res.Matched {
		row := []string{fmt.Sprint(dl.Seq), utcTime(dl.Time), dl.Subject, oneLine(dl.Reason)}
		if redrive {
			switch {
			case done[dl.Seq]:
				row = append(row, "sent")
			case skipped[dl.Seq] != "":
				row = append(row, "skipped: "+skipped[dl.Seq])
			default:
				row = append(row, "not sent")
			}
		}
		t.row(row...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if redrive {
		_, err := fmt.Fprintf(std.out, "re-drove %d of %d dead letters from %s to their original subjects\n", len(res.Redriven), len(res.Matched), res.Stream)
		return err
	}
	_, err := fmt.Fprintf(std.out, "%d dead letters in %s; once their cause is fixed: paysync deadletters --redrive (--seq N or --subject S to choose)\n", len(res.Matched), res.Stream)
	return err
}
