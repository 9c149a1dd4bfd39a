package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

type nopSink struct{}

func (nopSink) Commit(context.Context, Message) (Outcome, error) { return Committed, nil }

func TestNew_Defaults(t *testing.T) {
	s, err := New(Config{URL: "nats://127.0.0.1:4222"}, nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.cfg
	if c.Stream != "TIMESHEETS" || c.Durable != "paysync" || c.Filter != "timesheets.>" ||
		c.DeadLetter != "paysync.deadletter" || c.DeadLetterStream != "TIMESHEETS_DEADLETTER" || c.AckWait != 30*time.Second || c.MaxDeliver != -1 ||
		c.MaxAckPending != 1024 || c.PullMaxMessages != 512 || c.MaxBatch != 256 || c.NakDelay != 2*time.Second || c.MaxNakDelay != time.Minute || c.Name != "paysync" {
		t.Errorf("defaults: %+v", c)
	}
}

func TestNew_Validate(t *testing.T) {
	base := func() Config { return Config{URL: "nats://127.0.0.1:4222"} }
	tests := []struct {
		name string
		edit func(*Config)
		want string // in the error
	}{
		{"no URL", func(c *Config) { c.URL = " " }, "URL (NATS_URL) is required"},
		{"dead letter captured", func(c *Config) { c.DeadLetter = "timesheets.dead" }, `DeadLetter "timesheets.dead" is captured by the stream subject "timesheets.>"`},
		{"dead letter captured by star", func(c *Config) {
			c.Subjects = []string{"timesheets.>", "paysync.*"}
		}, `captured by the stream subject "paysync.*"`},
		{"dead letter wildcard", func(c *Config) { c.DeadLetter = "paysync.*" }, "without wildcards"},
		{"filter outside subjects", func(c *Config) { c.Filter = "other.>" }, `Filter "other.>" is not within`},
		{"bad filter", func(c *Config) { c.Filter = "timesheets..x" }, "not a valid subject"},
		{"bad stream name", func(c *Config) { c.Stream = "TIME SHEETS" }, "not a valid stream name"},
		{"bad durable", func(c *Config) { c.Durable = "pay.sync" }, "not a valid consumer name"},
		{"creds and nkey", func(c *Config) { c.CredsFile, c.NKeySeedFile = "a.creds", "seed.nk" }, "exclusive"},
		{"cert without key", func(c *Config) { c.CertFile = "cert.pem" }, "CertFile and KeyFile go together"},
		{"prefetch above max ack pending", func(c *Config) { c.PullMaxMessages, c.MaxAckPending = 100, 10 }, "exceeds MaxAckPending"},
		{"short ack wait", func(c *Config) { c.AckWait = time.Millisecond }, "AckWait"},
		{"max deliver below -1", func(c *Config) { c.MaxDeliver = -2 }, "MaxDeliver -2 must be -1 (unlimited) or at least 1"},
		{"dead-letter stream is the stream", func(c *Config) { c.DeadLetterStream = "TIMESHEETS" }, "DeadLetterStream \"TIMESHEETS\" is the source stream itself"},
		{"bad dead-letter stream", func(c *Config) { c.DeadLetterStream = "DEAD.LETTERS" }, "DeadLetterStream \"DEAD.LETTERS\" is not a valid stream name"},
		{"negative max nak delay", func(c *Config) { c.MaxNakDelay = -time.Second }, "MaxNakDelay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(&c)
			_, err := New(c, nopSink{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("max deliver unlimited or finite", func(t *testing.T) {
		for _, n := range []int{-1, 0, 1, 20} {
			c := base()
			c.MaxDeliver = n
			s, err := New(c, nopSink{})
			if err != nil {
				t.Fatalf("MaxDeliver %d: %v", n, err)
			}
			if n == 0 && s.cfg.MaxDeliver != -1 {
				t.Errorf("MaxDeliver 0 became %d, want the default -1", s.cfg.MaxDeliver)
			}
		}
	})
	t.Run("filter within subjects", func(t *testing.T) {
		c := base()
		c.Filter = "timesheets.MV8x.>"
		if _, err := New(c, nopSink{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bind skips the filter check", func(t *testing.T) {
		c := base()
		c.Bind, c.Filter = true, "elsewhere.>"
		if _, err := New(c, nopSink{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no sink", func(t *testing.T) {
		if _, err := New(base(), nil); err == nil {
			t.Fatal("want an error")
		}
	})
}

func TestCovers(t *testing.T) {
	tests := []struct {
		p, f string
		want bool
	}{
		{"timesheets.>", "timesheets.a.b", true},
		{"timesheets.>", "timesheets", false},
		{"timesheets.>", "timesheets.MV8x.>", true},
		{"timesheets.*", "timesheets.a", true},
		{"timesheets.*", "timesheets.a.b", false},
		{"timesheets.*.toggl", "timesheets.x.toggl", true},
		{"timesheets.*", "timesheets.>", false},
		{">", "paysync.deadletter", true},
		{"paysync.deadletter", "paysync.deadletter", true},
		{"paysync.dead", "paysync.deadletter", false},
		{"timesheets.a.>", "timesheets.>", false},
	}
	for _, tt := range tests {
		if got := covers(tt.p, tt.f); got != tt.want {
			t.Errorf("covers(%q, %q) = %v, want %v", tt.p, tt.f, got, tt.want)
		}
	}
}

func TestSubject(t *testing.T) {
	tests := []struct {
		prefix, company, source, want string
	}{
		{"timesheets", "MV8x", "toggl", "timesheets.MV8x.toggl"},
		{"", "", "", "timesheets.default.default"},
		{"acme.timesheets", "MV 8x", "my.tool", "acme.timesheets.MV_8x.my_tool"},
		{"timesheets.", "a*b", "c>d", "timesheets.a_b.c_d"},
		{"time sheets", "\tx\n", "y", "time_sheets.x.y"},
	}
	for _, tt := range tests {
		got := Subject(tt.prefix, tt.company, tt.source)
		if got != tt.want {
			t.Errorf("Subject(%q, %q, %q) = %q, want %q", tt.prefix, tt.company, tt.source, got, tt.want)
		}
		if !validSubject(got, false) {
			t.Errorf("Subject(%q, %q, %q) = %q is not a valid literal subject", tt.prefix, tt.company, tt.source, got)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	base := 2 * time.Second
	want := map[uint64]time.Duration{0: 2 * time.Second, 1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second,
		6: time.Minute, 20: time.Minute, 1 << 40: time.Minute}
	for delivered, w := range want {
		if got := retryDelay(base, time.Minute, delivered); got != w {
			t.Errorf("retryDelay(2s, 1m, %d) = %v, want %v", delivered, got, w)
		}
	}
	if got := retryDelay(2*time.Minute, time.Minute, 5); got != 2*time.Minute {
		t.Errorf("a base above the cap: got %v", got)
	}
	if got := retryDelay(10*time.Millisecond, 30*time.Millisecond, 10); got != 30*time.Millisecond {
		t.Errorf("a smaller cap: got %v", got)
	}
	// 2+4+8+16+32 s, then a minute per delivery: about 20 min to delivery 20.
	if got := retryBudget(base, time.Minute, 20); got != 62*time.Second+14*time.Minute {
		t.Errorf("retryBudget(2s, 1m, 20) = %v", got)
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("æøå", 3); got != "æ" {
		t.Errorf("got %q", got)
	}
	if got := headerValue("a\r\nb\tc", 100); got != "a b c" {
		t.Errorf("got %q", got)
	}
}

func ExampleSubject() {
	fmt.Println(Subject("timesheets", "MV8x", "toggl"))
	fmt.Println(Subject("timesheets", "", "Harvest export.csv"))
	// Output:
	// timesheets.MV8x.toggl
	// timesheets.default.Harvest_export_csv
}

func TestConnect(t *testing.T) {
	_, err := Connect(Config{URL: "nats://127.0.0.1:1", NKeySeedFile: "/nonexistent/seed.nk"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/seed.nk") {
		t.Errorf("missing seed file: got %v", err)
	}
	if _, err := Connect(Config{}); err == nil {
		t.Error("connected without a URL")
	}
	if got := redactURLs(" nats://u:secret@a:4222 , tls://b:4222"); got != "nats://***@a:4222,tls://b:4222" {
		t.Errorf("redactURLs: %q", got)
	}
}
