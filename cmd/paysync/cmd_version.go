package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/paysync/paysync"
)

func runVersion(_ context.Context, args []string, io stdio, _ lookupEnv) error {
	fs := newFlagSet("version", "version", io)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(io.out, "paysync %s (%s %s/%s)\n", paysync.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
