package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/worker/stream"
)

// runPublish publishes timesheet entries to JetStream, one message per
// entry: for time-tracking systems' scripts and for tests. The nats CLI
// equivalent of one message (see msgID):
//
//	m='{"id":"t-1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":7.5,"code":"T1"}'
//	nats pub timesheets.MV8x.toggl "$m" -H "Nats-Msg-Id:t-1:$(printf %s "$m" | sha256sum | cut -c1-16)"
func runPublish(ctx context.Context, args []string, std stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var format, source, company, prefix, rulesFile string
	fs := newFlagSet("publish", "publish [--source NAME] [--company ID] [--format F] FILE... (or - for standard input)", std)
	var natsURL string
	fs.StringVar(&natsURL, "nats-url", "", "NATS server(s) (default: NATS_URL; credentials belong in NATS_URL or NATS_CREDS, not on the command line)")
	fs.StringVar(&format, "format", "", "input format (default: detect)")
	fs.StringVar(&source, "source", "", "the <source> subject token (default: the file name)")
	fs.StringVar(&company, "company", cfg.CompanyID, "company for entries without company_id (the <company> subject token; default \"default\")")
	fs.StringVar(&prefix, "prefix", strings.TrimSuffix(cfg.NATSSubject, ".>"), "subject prefix (PAYSYNC_NATS_SUBJECT without .>)")
	fs.StringVar(&rulesFile, "rules", cfg.Mapping, "mapping rules file (PAYSYNC_MAPPING): its read: block is read here as import and the inbox read it")
	cfg.readFlags(fs)
	if err := fs.Parse(args); err != nil {
		return usageOrHelp(err)
	}
	rules, err := loadRulesFile(rulesFile)
	if err != nil {
		return err
	}
	opts, err := cfg.readOptions(format, rules)
	if err != nil {
		return err
	}
	if natsURL != "" {
		cfg.NATSURL = natsURL
	}
	if cfg.NATSURL == "" {
		return usagef("config: NATS_URL is not set")
	}
	if fs.NArg() == 0 {
		return usagef("publish: name at least one file, or - for standard input")
	}
	scfg := cfg.streamConfig(nil)
	scfg.Name = "paysync-publish"
	nc, err := stream.Connect(scfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	for i := 0; !nc.IsConnected(); i++ { // Connect keeps retrying in the background
		if i == 50 || ctx.Err() != nil {
			return fmt.Errorf("publish: cannot reach NATS at %v", nc.Servers())
		}
		time.Sleep(100 * time.Millisecond)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	published, dups, bad := 0, 0, 0
	for _, name := range fs.Args() {
		var r io.Reader = std.in
		src := source
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
			defer f.Close()
			r = f
			if src == "" {
				src = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
			}
		} else if src == "" {
			src = "stdin"
		}
		rd, _, err := mapping.NewReader(name, r, opts)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		if n, ok := rd.(mapping.Noter); ok {
			for _, note := range n.Notes() {
				fmt.Fprintf(std.err, "paysync: publish: note: %s\n", note)
			}
		}
		for {
			e, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				var p *mapping.Problem
				if errors.As(err, &p) {
					bad++
					fmt.Fprintf(std.err, "paysync: publish: skipped: %v\n", err)
					continue
				}
				return fmt.Errorf("publish: %w", err)
			}
			c := e.CompanyID
			if c == "" {
				c = company
			}
			dup, err := stream.Publish(ctx, js, stream.Subject(prefix, c, src), e)
			if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
				return fmt.Errorf("publish: entry %s: no stream takes %s: start `paysync run` once (it creates the stream %s) or create it", e.ID, stream.Subject(prefix, c, src), cfg.NATSStream)
			}
			if err != nil {
				return fmt.Errorf("publish: %w", err) // names the entry and the subject
			}
			if dup {
				dups++
			} else {
				published++
			}
		}
	}
	fmt.Fprintf(std.out, "published %s (%s dropped by the server, %s skipped)\n",
		plural(published, "entry", "entries"), plural(dups, "duplicate", "duplicates"), plural(bad, "unreadable entry", "unreadable entries"))
	if bad > 0 {
		return fmt.Errorf("publish: %d unreadable entries were not published", bad)
	}
	return nil
}
