package mapping

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/paysync/paysync"
)

// Directory is what mapping needs from the payroll system: the pay codes
// and a company's employees. *payroll.Client satisfies it.
type Directory interface {
	PayPartsMeta(ctx context.Context) ([]paysync.PayPartMeta, error)
	Employees(ctx context.Context, companyID string, employeeIDs []string) ([]paysync.Employee, error)
}

// Cache fetches meta once and each company's employees once.
type Cache struct {
	dir Directory

	mu          sync.Mutex
	meta        map[string]paysync.PayPartMeta
	metaFetched time.Time
	order       []string
	emps        map[string]*companyEmployees
}

type companyEmployees struct {
	byID    map[string]paysync.Employee
	byName  map[string][]paysync.Employee // folded name → employees
	err     error
	fetched time.Time     // when the read began
	done    time.Time     // when it ended
	ready   chan struct{} // closed when the read is done (byID, byName, err, done set)
}

// failFastFor is how long a transient failure to read a company's
// employees is given again to lookups of that company without asking
// payroll: during an outage, entry after entry of the company does not
// each wait for its own failing read (retried inside the client, honouring
// Retry-After). It is an error, never a verdict: the entry is retried.
const failFastFor = 2 * time.Second

// refreshAfter is how old a company's employee list must be before a miss
// fetches it again (a new hire in a long-running daemon).
const refreshAfter = 30 * time.Second

// refresh drops a company's cached employees if they are older than
// refreshAfter, so that the next lookup fetches them again. It reports
// whether it did.
func (c *Cache) refresh(companyID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ce, ok := c.emps[companyID]
	if !ok || time.Since(ce.fetched) < refreshAfter {
		return false
	}
	delete(c.emps, companyID)
	return true
}

// NewCache wraps dir.
func NewCache(dir Directory) *Cache {
	return &Cache{dir: dir, emps: map[string]*companyEmployees{}}
}

// Meta returns the pay code table, fetched on first use.
func (c *Cache) Meta(ctx context.Context) (map[string]paysync.PayPartMeta, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.meta != nil {
		return c.meta, nil
	}
	ms, err := c.dir.PayPartsMeta(ctx)
	if err != nil {
		return nil, err
	}
	c.meta, c.order, c.metaFetched = make(map[string]paysync.PayPartMeta, len(ms)), nil, time.Now()
	for _, m := range ms {
		c.meta[m.Code] = m
		c.order = append(c.order, m.Code)
	}
	return c.meta, nil
}

// refreshMeta drops the pay code table if it is older than refreshAfter,
// so that the next Meta fetches it again (a code added in payroll while
// the daemon runs). It reports whether it did.
func (c *Cache) refreshMeta() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.meta == nil || time.Since(c.metaFetched) < refreshAfter {
		return false
	}
	c.meta = nil
	return true
}

// Codes lists the known codes in the server's order (after Meta).
func (c *Cache) Codes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// company returns a company's employees, read on first use; concurrent
// lookups of a company share one read, outside the cache's lock. Only a
// company payroll does not know (paysync.ErrCompanyNotFound) is kept as an
// answer, until refreshAfter, so that one unknown company costs one read,
// not one per entry. Any other failure (an outage, a revoked connection)
// is not the entry's fault: it is given again only for failFastFor, as the
// transient error it is, and then read again.
func (c *Cache) company(ctx context.Context, companyID string) (*companyEmployees, error) {
	for {
		c.mu.Lock()
		ce, ok := c.emps[companyID]
		if !ok {
			ce = &companyEmployees{byID: map[string]paysync.Employee{}, byName: map[string][]paysync.Employee{}, fetched: time.Now(), ready: make(chan struct{})}
			c.emps[companyID] = ce
			c.mu.Unlock()
			return ce, c.read(ctx, companyID, ce)
		}
		c.mu.Unlock()
		select {
		case <-ce.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		hold := failFastFor
		if errors.Is(ce.err, paysync.ErrCompanyNotFound) {
			hold = refreshAfter
		}
		if ce.err == nil || time.Since(ce.done) < hold {
			return ce, ce.err
		}
		c.forget(companyID, ce)
	}
}

// read fills ce from payroll and marks it ready.
func (c *Cache) read(ctx context.Context, companyID string, ce *companyEmployees) error {
	defer close(ce.ready)
	emps, err := c.dir.Employees(ctx, companyID, nil)
	ce.done = time.Now()
	if err != nil {
		ce.err = err
		if ctx.Err() != nil { // this caller gave up: not an answer for others
			c.forget(companyID, ce)
		}
		return err
	}
	for _, e := range emps {
		ce.byID[e.ID] = e
		k := fold(e.Name)
		ce.byName[k] = append(ce.byName[k], e)
	}
	return nil
}

// forget drops ce if it is still the company's entry.
func (c *Cache) forget(companyID string, ce *companyEmployees) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.emps[companyID] == ce {
		delete(c.emps, companyID)
	}
}
