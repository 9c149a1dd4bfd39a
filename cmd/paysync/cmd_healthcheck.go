package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// runHealthcheck probes a health URL: exit 0 on HTTP 200 within 3 s, else
// 1. It exists for container HEALTHCHECKs in images without a shell or curl.
func runHealthcheck(ctx context.Context, args []string, io stdio, _ lookupEnv) error {
	fs := newFlagSet("healthcheck", "healthcheck [URL] (default http://127.0.0.1:9480/healthz)", io)
	if err := fs.Parse(args); err != nil {
		return usageOrHelp(err)
	}
	url := "http://127.0.0.1:9480/healthz"
	switch fs.NArg() {
	case 0:
	case 1:
		url = fs.Arg(0)
	default:
		return usagef("healthcheck: want at most one URL")
	}
	if err := checkURL(url); err != nil {
		return usagef("healthcheck: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usagef("healthcheck: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", url, resp.Status)
	}
	fmt.Fprintln(io.out, "ok")
	return nil
}
