package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/inbox"
)

// runOnce is `paysync run --once`: a command, so its start-up reads wait
// at most PAYSYNC_STARTUP_TIMEOUT. Work it could not do because a
// company's payroll connection is paused (revoked, or none serves it) is
// named, one line a company, and the exit is 1: the other companies' work
// was done, that one's waits for `paysync connect`.
func runOnce(ctx context.Context, s *session, d *worker.Daemon, in *inbox.Inbox, io stdio) error {
	err := d.RunOnce(ctx, s.commandWaiter(io.err), func(ctx context.Context) error {
		if in == nil {
			return nil
		}
		res, err := in.Poll(ctx)
		if err == nil {
			fmt.Fprintf(io.out, "inbox: %d processed, %d failed, %s, %d still being written\n", res.Processed, res.Failed, plural(res.Duplicates, "duplicate", "duplicates"), res.Waiting)
		}
		return err
	})
	if err != nil {
		return s.startupErr(ownershipHint(err))
	}
	st := d.Stats()
	fmt.Fprintf(io.out, "delivered: %d pay parts created, %d rejected; %d batches failed\n", st.Created, st.Rejected, st.Failed)
	if len(st.Waiting) == 0 {
		return nil
	}
	return waitingErr(ctx, s.led, st.Waiting, io)
}

// waitingErr says, one line a company, which companies' batches were left
// for their connection and what to do, and returns the command's error.
func waitingErr(ctx context.Context, led *ledger.Ledger, companies []string, io stdio) error {
	open, err := led.OpenBatches(ctx, 0)
	if err != nil {
		return err
	}
	n := map[string]int{}
	for _, b := range open {
		n[b.CompanyID]++
	}
	conns, err := led.Connections(ctx)
	if err != nil {
		return err
	}
	for _, c := range companies {
		label, why := c, "no payroll connection serves it"
		for _, cn := range conns {
			if !cn.Serves(c) {
				continue
			}
			for _, cc := range cn.Companies {
				if cc.ID == c && cc.Name != "" {
					label = cc.Name + " (" + c + ")"
				}
			}
			why = "its payroll connection is " + stateWords(cn.State)
		}
		fmt.Fprintf(io.out, "waiting: company %s: %s not sent, %s: run paysync connect and choose this company, then run --once again\n",
			label, plural(n[c], "batch", "batches"), why)
	}
	return errors.New("work left undone: the batches of " + plural(len(companies), "company", "companies") + " wait for a payroll connection (see above)")
}
