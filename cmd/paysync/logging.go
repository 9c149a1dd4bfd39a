package main

import (
	"log/slog"
	"time"
)

// durationsAsText is the ReplaceAttr of paysync's JSON loggers: slog's
// JSON handler writes a time.Duration as integer nanoseconds
// (30000000000); operators read "30s". A list of durations reads the same
// way.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value; {
	case v.Kind() == slog.KindDuration:
		a.Value = slog.StringValue(v.Duration().String())
	case v.Kind() == slog.KindAny:
		if ds, ok := v.Any().([]time.Duration); ok {
			s := make([]string, len(ds))
			for i, d := range ds {
				s[i] = d.String()
			}
			a.Value = slog.AnyValue(s)
		}
	}
	return a
}
