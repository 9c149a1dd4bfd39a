package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// Issue 16: ack_wait was logged in nanoseconds (slog's JSON handler writes
// a time.Duration as an integer). The daemon's loggers write every
// duration as Go writes it ("30s", "250ms"), lists of them too (a
// consumer's BackOff).
func TestRun_LogsDurationsAsText(t *testing.T) {
	cfg := config{LogLevel: "info"}
	var sw, plain bytes.Buffer
	sl, _ := cfg.switchableLogger(&sw)
	loggers := map[string]struct {
		log *slog.Logger
		buf *bytes.Buffer
	}{"switchable": {sl, &sw}, "plain": {cfg.logger(&plain), &plain}}
	for name, l := range loggers {
		t.Run(name, func(t *testing.T) {
			l.log.Info("consuming", "ack_wait", 30*time.Second, "max_deliver", -1,
				slog.Group("nak", "delay", 1500*time.Millisecond), "took", slog.DurationValue(250*time.Millisecond),
				"backoff", []time.Duration{time.Second, 2 * time.Minute})
			var rec map[string]any
			if err := json.Unmarshal(l.buf.Bytes(), &rec); err != nil {
				t.Fatalf("%v: %s", err, l.buf)
			}
			nak, _ := rec["nak"].(map[string]any)
			for key, got := range map[string]any{"ack_wait": rec["ack_wait"], "nak.delay": nak["delay"], "took": rec["took"]} {
				want := map[string]string{"ack_wait": "30s", "nak.delay": "1.5s", "took": "250ms"}[key]
				if got != want {
					t.Errorf("%s = %#v, want %q: %s", key, got, want, l.buf)
				}
			}
			if got, _ := json.Marshal(rec["backoff"]); string(got) != `["1s","2m0s"]` {
				t.Errorf("backoff = %s, want [\"1s\",\"2m0s\"]", got)
			}
			if rec["max_deliver"] != float64(-1) {
				t.Errorf("max_deliver = %#v, want the number -1", rec["max_deliver"])
			}
		})
	}
}
