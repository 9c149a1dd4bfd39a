package mapping_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
)

// TestPlanner_Take: pay parts are numbered in order of first appearance
// and handed over once each, counting their lines instead of keeping
// them; without aggregation each as soon as its line is placed, with it at
// the end. One whose values the wire cannot carry comes with its problems.
func TestPlanner_Take(t *testing.T) {
	cl, schema := directory(t, sandbox.Options{Allowed: sandbox.AllowedEnum, Numbers: sandbox.NumbersInt})
	for _, aggregate := range []bool{true, false} {
		t.Run(fmt.Sprintf("aggregate=%v", aggregate), func(t *testing.T) {
			r := rules(t, testRules)
			r.Aggregate = aggregate
			m := mapping.NewMapper(r, mapping.NewCache(cl), schema, "")
			p := mapping.NewPlanner(r, schema)
			var placed []mapping.Placed
			var lines int
			for i := 0; i < 60; i++ {
				e := entry(fmt.Sprint(i), func(e *paysync.Entry) {
					e.Hours = paysync.HoursFromSeconds(int64(600 + 60*i))
					switch i % 5 {
					case 1:
						e.Tags = []string{"evening"} // two lines: hours and a supplement
					case 2:
						e.Type = "overtime"
					case 3:
						e.Type, e.Fields = "mileage", map[string]string{"km": fmt.Sprintf("%d.%03d", i, i)} // 3 decimals: the wire carries 2
					}
				})
				ls, err := m.Map(context.Background(), e)
				if err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
				for _, l := range ls {
					lines++
					if idx := p.Place(l); aggregate && idx > 3 || !aggregate && idx != lines-1 {
						t.Fatalf("line %d placed in pay part %d", lines, idx)
					}
				}
				got := p.Take(false)
				if aggregate && len(got) > 0 || !aggregate && len(got) != len(ls) {
					t.Fatalf("entry %d: Take(false) = %d pay parts", i, len(got))
				}
				placed = append(placed, got...)
			}
			placed = append(placed, p.Take(true)...)
			if again := p.Take(true); len(again) != 0 {
				t.Fatalf("Take again: %d pay parts", len(again))
			}
			var sprobs []error
			summed := 0
			for i, pl := range placed {
				if pl.Index != i {
					t.Errorf("pay part %d has index %d", i, pl.Index)
				}
				summed += pl.Entries
				if len(pl.Problems) > 0 {
					sprobs = append(sprobs, pl.Problems...)
					continue
				}
				if pl.PayPart.Entries != nil {
					t.Errorf("pay part %d keeps its entries", i)
				}
			}
			if summed != lines {
				t.Errorf("pay parts sum %d lines, want %d", summed, lines)
			}
			if len(sprobs) == 0 {
				t.Error("no problem for kilometres with 3 decimals")
			}
			for _, p := range sprobs {
				if mp := (*mapping.Problem)(nil); !errors.As(p, &mp) || mp.Field != "units" {
					t.Errorf("problem %v; want one about the units", p)
				}
			}
		})
	}
}
