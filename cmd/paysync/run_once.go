package main

import (
	"context"
	"fmt"

	"github.com/paysync/paysync/worker"
	"github.com/paysync/paysync/worker/inbox"
)

// runOnce is `paysync run --once`: a command, so its start-up reads wait
// at most PAYSYNC_STARTUP_TIMEOUT.
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
	return nil
}
