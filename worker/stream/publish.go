package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/paysync/paysync"
)

// Publish publishes e as JSON on subject through JetStream, with the entry
// id as Nats-Msg-Id, and waits for the stream's acknowledgement. dup
// reports that the stream already had a message of that id within its
// duplicate window and dropped this one.
func Publish(ctx context.Context, js jetstream.JetStream, subject string, e paysync.Entry) (dup bool, err error) {
	if e.ID == "" {
		return false, errors.New("stream: publish: entry has no id (the id is the dedupe key)")
	}
	if !validSubject(subject, false) {
		return false, fmt.Errorf("stream: publish: %q is not a subject one can publish on", subject)
	}
	data, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("stream: publish entry %s: %w", e.ID, err)
	}
	ack, err := js.Publish(ctx, subject, data, jetstream.WithMsgID(e.ID))
	if err != nil {
		return false, fmt.Errorf("stream: publish entry %s on %s: %w", e.ID, subject, err)
	}
	return ack.Duplicate, nil
}
