package mapping_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
)

// TestPlanner_Stream: a stream planner plans the same pay parts as one
// that keeps every entry (and the same problems), numbering them in order
// of first appearance and counting their entries instead of keeping them;
// without aggregation it hands each over as soon as its line is placed.
func TestPlanner_Stream(t *testing.T) {
	cl, schema := directory(t, sandbox.Options{Allowed: sandbox.AllowedEnum, Numbers: sandbox.NumbersInt})
	for _, aggregate := range []bool{true, false} {
		t.Run(fmt.Sprintf("aggregate=%v", aggregate), func(t *testing.T) {
			r := rules(t, testRules)
			r.Aggregate = aggregate
			m := mapping.NewMapper(r, mapping.NewCache(cl), schema, "")
			full, stream := mapping.NewPlanner(r, schema), mapping.NewStreamPlanner(r, schema)
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
					if err := full.Add(l); err != nil {
						t.Fatal(err)
					}
					if idx := stream.Place(l); aggregate && idx > 3 || !aggregate && idx != lines-1 {
						t.Fatalf("line %d placed in pay part %d", lines, idx)
					}
				}
				got := stream.Take(false)
				if aggregate && len(got) > 0 || !aggregate && len(got) != len(ls) {
					t.Fatalf("entry %d: Take(false) = %d pay parts", i, len(got))
				}
				placed = append(placed, got...)
			}
			placed = append(placed, stream.Take(true)...)
			if again := stream.Take(true); len(again) != 0 {
				t.Fatalf("Take again: %d pay parts", len(again))
			}
			pps, probs := full.PayParts()
			var sprobs []error
			var spps []paysync.PlannedPayPart
			for i, pl := range placed {
				if pl.Index != i {
					t.Errorf("pay part %d has index %d", i, pl.Index)
				}
				if len(pl.Problems) > 0 {
					sprobs = append(sprobs, pl.Problems...)
					continue
				}
				if pl.PayPart.Entries != nil {
					t.Errorf("pay part %d keeps its entries", i)
				}
				spps = append(spps, pl.PayPart)
				if n := len(pps[len(spps)-1].Entries); pl.Entries != n {
					t.Errorf("pay part %d: %d entries, want %d", i, pl.Entries, n)
				}
			}
			if len(probs) == 0 || fmt.Sprint(sprobs) != fmt.Sprint(probs) {
				t.Errorf("problems:\n%v\nwant\n%v", sprobs, probs)
			}
			for i := range pps {
				pps[i].Entries = nil
			}
			if !reflect.DeepEqual(spps, pps) {
				t.Errorf("pay parts:\n%+v\nwant\n%+v", spps, pps)
			}
		})
	}
}
