package ledger

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestLedger_Ownership(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	a := setupBatch(t, l, "A", 3)
	b := setupBatch(t, l, "B", 1)
	for _, c := range []string{"A", "B", "C"} {
		if ok, err := l.HasSnapshot(ctx, c); err != nil || ok {
			t.Errorf("HasSnapshot(%s) on a new ledger = %v, %v", c, ok, err)
		}
	}

	// Foreign ids seen while reading, without a full snapshot.
	if err := l.AddForeign(ctx, "A", []string{"f1", "f2"}, false); err != nil {
		t.Fatal(err)
	}
	if ok, _ := l.HasSnapshot(ctx, "A"); ok {
		t.Error("HasSnapshot(A) after a partial read")
	}
	// A full read: overlapping ids are fine.
	clk.Advance(time.Minute)
	if err := l.AddForeign(ctx, "A", []string{"f2", "f3"}, true); err != nil {
		t.Fatal(err)
	}
	if err := l.AddForeign(ctx, "A", nil, true); err != nil { // snapshot again
		t.Fatal(err)
	}
	if err := l.AddForeign(ctx, "C", nil, true); err != nil { // a company with nothing foreign
		t.Fatal(err)
	}
	if err := l.AddForeign(ctx, "B", []string{"fb"}, false); err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]bool{"A": true, "B": false, "C": true, "D": false} {
		if ok, err := l.HasSnapshot(ctx, c); err != nil || ok != want {
			t.Errorf("HasSnapshot(%s) = %v, %v; want %v", c, ok, err, want)
		}
	}

	// Ours: two of A's items created, one of B's.
	if err := l.RecordCreated(ctx, a.batch, 0, map[int64]string{a.items[0]: "p1", a.items[2]: "p2"}, "ok"); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordCreated(ctx, b.batch, 0, map[int64]string{b.items[0]: "pb"}, "ok"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		company      string
		known, owned []string
	}{
		{"A", []string{"f1", "f2", "f3", "p1", "p2"}, []string{"p1", "p2"}},
		{"B", []string{"fb", "pb"}, []string{"pb"}},
		{"C", nil, nil},
		{"D", nil, nil},
	}
	for _, tt := range tests {
		known, err := l.Known(ctx, tt.company)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(known)); !reflect.DeepEqual(got, tt.known) {
			t.Errorf("Known(%s) = %v, want %v", tt.company, got, tt.known)
		}
		owned, err := l.Owned(ctx, tt.company)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(maps.Keys(owned)); !reflect.DeepEqual(got, tt.owned) {
			t.Errorf("Owned(%s) = %v, want %v", tt.company, got, tt.owned)
		}
		for id := range owned {
			if !known[id] {
				t.Errorf("%s: owned %s is not known", tt.company, id)
			}
		}
	}
	var taken string
	if err := l.db.QueryRowContext(ctx, "SELECT taken_at FROM company_snapshots WHERE company_id = 'A'").Scan(&taken); err != nil || !parseTS(taken).Equal(t0.Add(time.Minute)) {
		t.Errorf("snapshot of A taken at %q, %v; want %v", taken, err, t0.Add(time.Minute))
	}
}

func TestLedger_Credentials(t *testing.T) {
	t.Parallel()
	l, clk := newLedger(t)
	ctx := t.Context()
	if _, _, _, err := l.Credentials(ctx, "default"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("Credentials on an empty ledger = %v, want ErrNoCredentials", err)
	}

	steps := []struct {
		name, token, seed string
	}{
		{"default", "refresh-1", "seed-a"},
		{"other", "refresh-x", "seed-x"},
		{"default", "refresh-2", "seed-a"}, // rotated
		{"default", "refresh-3", "seed-b"}, // new initial token
	}
	want := map[string][2]string{}
	wantAt := map[string]time.Time{}
	for i, s := range steps {
		clk.Advance(time.Duration(i+1) * time.Minute)
		if err := l.SaveCredentials(ctx, s.name, s.token, s.seed, "", time.Time{}, time.Time{}); err != nil {
			t.Fatalf("SaveCredentials #%d: %v", i, err)
		}
		want[s.name] = [2]string{s.token, s.seed}
		wantAt[s.name] = clk.Now()
		for name, w := range want {
			rt, seed, at, err := l.Credentials(ctx, name)
			if err != nil || rt != w[0] || seed != w[1] || !at.Equal(wantAt[name]) {
				t.Errorf("after save #%d: Credentials(%s) = %q, %q, %v, %v; want %q, %q, %v", i, name, rt, seed, at, err, w[0], w[1], wantAt[name])
			}
		}
	}
	var n int
	if err := l.db.QueryRowContext(ctx, "SELECT count(*) FROM credentials").Scan(&n); err != nil || n != 2 {
		t.Errorf("%d credential rows, %v; want 2 (saving replaces)", n, err)
	}
	if _, _, _, err := l.Credentials(ctx, "nobody"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("Credentials(nobody) = %v, want ErrNoCredentials", err)
	}
}
