package main

import (
	"bytes"
	"context"
	"io"
	"os/user"
	"strings"

	"github.com/paysync/paysync/ledger"
)

// The CLI's revert, replay and periods close|open are written to the
// ledger's audit log as the console's actions are, so the console's audit
// page shows every change whichever way it was made.

// cliActor is who the audit log names for the CLI: "cli:" and the OS user.
func cliActor(env lookupEnv) string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name, _ = env("USER")
	}
	if name == "" {
		name = "unknown"
	}
	return "cli:" + name
}

// audited runs fn, an action on scope, in the ledger's audit log: begun
// now, finished with the detail fn returns ("": the last line it printed
// to std.out, its summary) or with its error. A dry run or a listing is not
// an action: its callers do not audit it.
func audited(ctx context.Context, l *ledger.Ledger, env lookupEnv, std *stdio, action, scope string, fn func() (string, error)) error {
	id, _, err := l.BeginAudit(ctx, ledger.AuditEntry{Actor: cliActor(env), Action: action, Scope: scope})
	if err != nil {
		return err
	}
	last := &lastLine{w: std.out}
	out := std.out
	std.out = last
	detail, runErr := fn()
	std.out = out
	result := ledger.AuditDone
	if detail == "" {
		detail = last.String()
	}
	if runErr != nil {
		result, detail = ledger.AuditFailed, runErr.Error()
	}
	if err := l.FinishAudit(context.WithoutCancel(ctx), id, result, detail); err != nil && runErr == nil {
		return err
	}
	return runErr
}

// lastLine passes writes through and keeps the last non-empty line
// written: a command's closing summary.
type lastLine struct {
	w    io.Writer
	line []byte
	part []byte
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		if s := bytes.TrimSpace(l.part[:i]); len(s) > 0 {
			l.line = append(l.line[:0], s...)
		}
		l.part = l.part[i+1:]
	}
	return l.w.Write(p)
}

func (l *lastLine) String() string {
	if s := strings.TrimSpace(string(l.part)); s != "" {
		return s
	}
	return string(l.line)
}
