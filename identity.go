package paysync

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
)

// Key is an entry's identity within its source, the key intake dedupes
// on: today its id (given by the source, or derived by the reader for
// exports without ids).
func (e Entry) Key() string { return e.ID }

// EntryHash is the content hash of an entry (its JSON, without where it
// came from) and that JSON: the test for "same entry, same content".
func EntryHash(e Entry) (string, []byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", nil, err
	}
	return PayloadHash(b), b, nil
}

// PayloadHash is the content hash of a source's raw input (sha256, hex):
// the same input imported again is recognised by it.
func PayloadHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// PayloadDigest hashes a source's raw input as it is read, for input too
// large to hold: Sum is PayloadHash of everything written. The zero value
// is ready to use.
type PayloadDigest struct{ h hash.Hash }

func (d *PayloadDigest) Write(p []byte) (int, error) {
	if d.h == nil {
		d.h = sha256.New()
	}
	return d.h.Write(p)
}

// Sum is the content hash of what was written so far.
func (d *PayloadDigest) Sum() string {
	if d.h == nil {
		return PayloadHash(nil)
	}
	return hex.EncodeToString(d.h.Sum(nil))
}
