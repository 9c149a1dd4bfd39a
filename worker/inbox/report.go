package inbox

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// report is the text written beside a moved file, for the person who
// dropped it.
type report struct {
	file      string // name in the inbox
	moved     string // where it went, relative to the inbox
	size      int64
	sizeKnown bool
	at        time.Time
	outcome   string
	rep       *Imported // nil when the file was not imported
	problems  []error
	next      string
	read      bool     // the import read the file's content
	earlier   []string // what happened to earlier states of the file (it changed after an import read it)
}

func (r report) String() string {
	// problems may end in a line saying how many more the ledger holds:
	// the counts are the import's totals.
	nProblems := len(r.problems)
	if r.rep != nil {
		nProblems = r.rep.ProblemCount()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "paysync inbox report\n\n")
	if r.sizeKnown {
		fmt.Fprintf(&b, "file:      %s (%s)\n", r.file, count(int(r.size), "byte"))
	} else {
		fmt.Fprintf(&b, "file:      %s\n", r.file)
	}
	fmt.Fprintf(&b, "moved to:  %s\n", r.moved)
	fmt.Fprintf(&b, "at:        %s\n", r.at.UTC().Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(&b, "outcome:   %s\n", r.outcome)
	if rep := r.rep; rep != nil {
		for _, n := range rep.Notes {
			fmt.Fprintf(&b, "read:      %s\n", n)
		}
		if rep.ImportID != 0 {
			fmt.Fprintf(&b, "import:    %d\n", rep.ImportID)
			if rep.RetryOf != 0 {
				fmt.Fprintf(&b, "again:     the same content as import %d, which had rejects: taken again (what landed then counts as already imported)\n", rep.RetryOf)
			}
		} else {
			fmt.Fprintf(&b, "import:    none (nothing was committed or sent)\n")
		}
		fmt.Fprintf(&b, "entries:   %d read, %d already imported, %s\n", rep.Entries, rep.Duplicates, count(nProblems, "problem"))
		if !rep.Duplicate && rep.ImportID != 0 {
			fmt.Fprintf(&b, "pay parts: %d in %s\n", rep.PayParts, count(rep.Batches, "batch"))
		}
		if len(rep.Skipped) > 0 {
			reasons := make([]string, 0, len(rep.Skipped))
			for k := range rep.Skipped {
				reasons = append(reasons, k)
			}
			sort.Strings(reasons)
			parts := make([]string, len(reasons))
			for i, k := range reasons {
				parts[i] = fmt.Sprintf("%d %s", rep.Skipped[k], k)
			}
			fmt.Fprintf(&b, "skipped:   %s\n", strings.Join(parts, ", "))
		}
		if rep.Corrections+rep.Removed > 0 {
			fmt.Fprintf(&b, "corrected: %s changed since paid, %s no longer in the period statement: their pay parts replaced (paysync corrections --import %d)\n",
				count(rep.Corrections, "entry"), count(rep.Removed, "entry"), rep.ImportID)
		}
		if rep.Outside > 0 {
			fmt.Fprintf(&b, "outside:   %s dated outside the period, not imported\n", count(rep.Outside, "row"))
		}
	}
	if r.rep != nil && len(r.rep.Warnings) > 0 {
		fmt.Fprintf(&b, "\nwarnings (%d):\n", r.rep.Outside)
		for _, w := range r.rep.Warnings {
			fmt.Fprintf(&b, "  %s\n", oneLine(w))
		}
	}
	if len(r.problems) > 0 {
		fmt.Fprintf(&b, "\nproblems (%d):\n", nProblems)
		for _, p := range r.problems {
			fmt.Fprintf(&b, "  %s\n", oneLine(p.Error()))
		}
	}
	next := r.next
	if len(r.earlier) > 0 {
		fmt.Fprintf(&b, "\nchanged while being written:\n")
		for _, e := range r.earlier {
			fmt.Fprintf(&b, "  %s\n", oneLine(e))
		}
		next += fmt.Sprintf(" Have the program that writes the file write it under a temporary name (such as %s.part) and rename it when it is complete: then paysync never reads half a file.", r.file)
	}
	fmt.Fprintf(&b, "\nwhat to do next: %s\n", next)
	return b.String()
}

// oneLine keeps a problem on its own line even if its text has breaks.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// count says "1 problem", "3 problems", "2 batches".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	if strings.HasSuffix(noun, "ry") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
