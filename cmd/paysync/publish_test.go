package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/worker/stream"
)

// TestPublish_Corrections: the Nats-Msg-Id names the entry's version, so
// a corrected entry published within the stream's duplicate window is
// stored (not dropped as a re-publish of its id), while the same version
// again still is dropped.
func TestPublish_Corrections(t *testing.T) {
	ns := natstest.Start(t)
	_, js := natstest.Connect(t, ns.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream.DefaultStream, Subjects: []string{stream.DefaultSubject},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const (
		first     = `{"id":"c-1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":8,"code":"T1"}`
		corrected = `{"id":"c-1","employee_id":"MV8xXzE=","date":"2026-11-02","hours":8.5,"code":"T1"}`
	)
	env := map[string]string{"NATS_URL": ns.ClientURL()}
	for i, step := range []struct {
		entry, want string
	}{
		{first, "published 1 entry (0 duplicates"},
		{corrected, "published 1 entry (0 duplicates"}, // before: dropped as a duplicate of c-1
		{corrected, "published 0 entries (1 duplicate dropped by the server"},
		{first, "published 0 entries (1 duplicate dropped by the server"},
	} {
		file := filepath.Join(dir, "hours.ndjson")
		if err := os.WriteFile(file, []byte(step.entry+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runBinary(t, env, "publish", file)
		if r.code != 0 || !strings.Contains(r.stdout, step.want) {
			t.Fatalf("publish #%d: exit %d, want 0 and %q\nstdout: %s\nstderr: %s", i+1, r.code, step.want, r.stdout, r.stderr)
		}
		assertClean(t, r)
	}
	s, err := js.Stream(ctx, stream.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().State.Msgs; got != 2 {
		t.Fatalf("the stream holds %d messages, want 2 (both versions of c-1)", got)
	}
	// Each message's id is the entry id and the first 16 hex digits of
	// its payload's SHA-256 (the README's `nats pub` recipe).
	var hours []string
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		want := "c-1:" + paysync.PayloadHash(m.Data)[:16]
		if got := m.Header.Get(jetstream.MsgIDHeader); got != want {
			t.Errorf("message %d: Nats-Msg-Id %q, want %q", seq, got, want)
		}
		var e paysync.Entry
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Fatal(err)
		}
		hours = append(hours, e.Hours.String())
	}
	if strings.Join(hours, " ") != "8 8.5" {
		t.Errorf("stored hours %v, want [8 8.5]", hours)
	}
}
