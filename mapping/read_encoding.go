package mapping

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/transform"
)

// Text encodings. Exports come as UTF-8 (often with a byte order mark
// from spreadsheets) or, from older Windows tools and re-saved files, as
// Windows-1252. Reading one as the other turns "Søren" into "S\xf8ren"
// or "SÃ¸ren" and the person is never found, so the readers never guess
// silently: in auto, input whose first bytes are not UTF-8 is read as
// Windows-1252 and the reader's Notes say so; invalid UTF-8 after those
// bytes stops the read with the line and the setting to change.

// encodingNote is what a report says of a detected Windows-1252 input.
var encodingNote = fmt.Sprintf("read as Windows-1252 (detected); set %s to declare it", settingEncoding)

// decodeInput returns the input of br, after the byte order mark (bom:
// there was one), as UTF-8 text, and a note when the encoding was
// detected as other than UTF-8. size is the read buffer's size.
func decodeInput(br *bufio.Reader, enc Encoding, bom bool, size int) (*bufio.Reader, string, error) {
	if bom && enc != EncodingAuto && enc != EncodingUTF8 {
		return nil, "", fmt.Errorf("the input starts with a UTF-8 byte order mark, but the encoding is set to %s: drop that setting (%s)", enc, settingEncoding)
	}
	note := ""
	if enc == EncodingAuto {
		b := peekUntil(br, func([]byte) bool { return false })
		whole := len(b) < br.Size()
		if !whole {
			b = b[:completeRunes(b)]
		}
		if utf8.Valid(b) {
			if whole {
				return br, "", nil // all of it is valid: nothing to check further
			}
			enc = EncodingUTF8
		} else if bom {
			enc = EncodingUTF8 // the mark says UTF-8: the check reports the line
		} else {
			enc, note = EncodingWindows1252, encodingNote
		}
	}
	switch enc {
	case EncodingWindows1252:
		return bufio.NewReaderSize(transform.NewReader(br, charmap.Windows1252.NewDecoder()), size), note, nil
	case EncodingLatin1:
		return bufio.NewReaderSize(transform.NewReader(br, charmap.ISO8859_1.NewDecoder()), size), note, nil
	}
	return bufio.NewReaderSize(&utf8Check{r: br}, size), note, nil
}

// completeRunes returns the length of b without an incomplete UTF-8
// sequence at its end (one that the next bytes may complete).
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// utf8Check passes on UTF-8 text and fails the read at the first byte
// that is not, naming its line: never a silent U+FFFD.
type utf8Check struct {
	r     io.Reader
	line  int    // newlines passed on
	carry []byte // an incomplete sequence at the end of the last read
	err   error
}

func (u *utf8Check) Read(p []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	if len(p) < utf8.UTFMax {
		return 0, io.ErrShortBuffer
	}
	n := copy(p, u.carry)
	u.carry = u.carry[:0]
	m, err := u.r.Read(p[n:])
	n += m
	end := n
	if err == nil {
		end = completeRunes(p[:n])
	}
	if i := invalidUTF8(p[:end]); i >= 0 {
		u.line += bytes.Count(p[:i], []byte{'\n'})
		u.err = fmt.Errorf("line %d: not valid UTF-8 (the input was read as UTF-8, as its beginning is): if it is in another encoding, declare it with %s (e.g. windows-1252)",
			u.line+1, settingEncoding)
		return i, nil
	}
	u.line += bytes.Count(p[:end], []byte{'\n'})
	u.carry = append(u.carry, p[end:n]...)
	return end, err
}

// invalidUTF8 returns the index of the first byte of b that is not valid
// UTF-8, or -1.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}
