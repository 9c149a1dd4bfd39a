package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/paysync/paysync"
)

// Publish publishes e as JSON on subject through JetStream, with
// Nats-Msg-Id the entry id, ":" and the first 16 hex digits of the
// payload's SHA-256 (as `paysync publish`), and waits for the stream's
// acknowledgement. The id names the version: with the bare entry id the
// stream would drop a corrected entry published within its duplicate
// window of the first version. dup reports that the stream already had
// this very version within its duplicate window and dropped this one.
func Publish(ctx context.Context, js jetstream.JetStream, subject string, e paysync.Entry) (dup bool, err error) {
	if e.ID == "" {
		return false, errors.New("stream: publish: entry has no id (the id is the dedupe key)")
	}
	if !validSubject(subject, false) {
		return false, fmt.Errorf("stream: publish: %q is not a subject one can publish on", subject)
	}
	h, data, err := paysync.EntryHash(e)
	if err != nil {
		return false, fmt.Errorf("stream: publish entry %s: %w", e.ID, err)
	}
	ack, err := js.Publish(ctx, subject, data, jetstream.WithMsgID(e.ID+":"+h[:16]))
	if err != nil {
		return false, fmt.Errorf("stream: publish entry %s on %s: %w", e.ID, subject, err)
	}
	return ack.Duplicate, nil
}
